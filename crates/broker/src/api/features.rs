//! Feature flags (KIP-584): what ApiVersions v3+ lists as supported and
//! finalized, and UpdateFeatures, which `kafka-features.sh upgrade` and
//! `downgrade` send.
//!
//! The levels say what this broker does, feature by feature: a Kafgres node
//! is one build, not a cluster rolling through versions, and the levels are
//! fixed but for one setting. `transaction.version` is
//! `kafgres.transaction_version`, 2 by default as Kafka 4.x finalizes it:
//! clients that know KIP-890 part 2 bump the epoch at each EndTxn and add
//! partitions implicitly with their produces, and the others keep the
//! version 1 protocol, both served (1 makes every client use version 1);
//! `group.version` 1 is the KIP-848 consumer protocol;
//! `eligible.leader.replicas.version` 1 because every partition's one replica
//! is always its leader (empty ELR lists); `metadata.version` and
//! `kraft.version` are listed as a Kafka 4.4 node lists them so that tools
//! reading them see a 4.4 broker, though Kafgres's metadata lives in
//! Postgres, not in a KRaft log. `share.version` 2: share groups (KIP-932)
//! are served with ShareFetch and ShareAcknowledge v2 (KIP-1206 acquire
//! modes, KIP-1222 renew acknowledgements), as a new Kafka 4.4 node finalizes
//! it (1 is 4.1's protocol, which v1 clients still get). `streams.version` 1:
//! the Streams group protocol (KIP-1071, StreamsGroupHeartbeat and
//! StreamsGroupDescribe), as Kafka 4.4 finalizes it.
//!
//! UpdateFeatures answers as Kafka's controller does: an update to the level
//! a feature is at succeeds (nothing changes), an unknown feature or a level
//! outside the supported range fails the whole request with Kafka's message;
//! a change within the range is refused too, saying the levels are fixed.

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::api_versions_response::{FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};

use super::handler::{Answer, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::acl::Operation;
use crate::config::BrokerConfig;

/// One feature: the levels this broker supports and the one it runs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feature {
    pub name: &'static str,
    pub min_supported: i16,
    pub max_supported: i16,
    /// `None`: supported but not enabled (level 0, not listed as finalized).
    pub finalized: Option<i16>,
}

/// In name order, as Kafka lists them.
pub const FEATURES: &[Feature] = &[
    Feature { name: "eligible.leader.replicas.version", min_supported: 0, max_supported: 1, finalized: Some(1) },
    Feature { name: "group.version", min_supported: 0, max_supported: 1, finalized: Some(1) },
    Feature { name: "kraft.version", min_supported: 0, max_supported: 1, finalized: None },
    // 7 is 3.3-IV3, the oldest Kafka 4 reads; 33 is 4.4-IV2, what a new Kafka 4.4.0 node finalizes.
    Feature { name: "metadata.version", min_supported: 7, max_supported: 33, finalized: Some(33) },
    Feature { name: "share.version", min_supported: 0, max_supported: 2, finalized: Some(2) },
    Feature { name: "streams.version", min_supported: 0, max_supported: 1, finalized: Some(1) },
    Feature { name: "transaction.version", min_supported: 0, max_supported: 2, finalized: Some(2) },
];

/// The feature a setting finalizes (`kafgres.transaction_version`).
const TRANSACTION_VERSION: &str = "transaction.version";

/// Each feature's finalized level, `transaction.version` as set.
fn finalized_level(feature: &Feature, transaction_version: i16) -> Option<i16> {
    if feature.name == TRANSACTION_VERSION {
        Some(transaction_version)
    } else {
        feature.finalized
    }
}

pub fn supported_features() -> Vec<SupportedFeatureKey> {
    FEATURES
        .iter()
        .map(|f| {
            let mut key = SupportedFeatureKey::default();
            key.name = str_bytes(f.name);
            key.min_version = f.min_supported;
            key.max_version = f.max_supported;
            key
        })
        .collect()
}

/// The finalized features, `transaction.version` at `transaction_version`.
/// Their epoch is [`crate::settings::LiveSettings::features_epoch`]: Kafka's
/// is the offset of the last feature record in its metadata log, here when
/// the levels last took effect, which only grows.
pub fn finalized_features(transaction_version: i16) -> Vec<FinalizedFeatureKey> {
    FEATURES
        .iter()
        .filter_map(|f| {
            let level = finalized_level(f, transaction_version)?;
            let mut key = FinalizedFeatureKey::default();
            key.name = str_bytes(f.name);
            key.min_version_level = level;
            key.max_version_level = level;
            Some(key)
        })
        .collect()
}

pub struct UpdateFeatures;

impl Handler for UpdateFeatures {
    const KEY: ApiKey = ApiKey::UpdateFeatures;
    /// v0-v2: Kafka 4.1's range; v1 adds `validate_only`, v2 drops the
    /// per-feature results (a failure is the top-level error).
    const VERSIONS: Versions = Versions::new(0, 2);
    type Request = UpdateFeaturesRequest;
    type Response = UpdateFeaturesResponse;
    type Services<'a> = &'a BrokerConfig;

    async fn handle(
        config: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: UpdateFeaturesRequest,
    ) -> Answer<Self::Response> {
        let mut response = UpdateFeaturesResponse::default();
        if !cx.may_on_cluster(Operation::Alter) {
            response.error_code = error_code::CLUSTER_AUTHORIZATION_FAILED;
            return response.into();
        }
        let refusal = req.feature_updates.iter().find_map(|u| {
            check_update(config.node_id, &u.feature, u.max_version_level, config.live.transaction_version()).err()
        });
        if let Some(message) = refusal {
            response.error_code = error_code::INVALID_UPDATE_VERSION;
            response.error_message = Some(str_bytes(&format!(
                "The update failed for all features since the following feature had an error: {message}"
            )));
            return response.into();
        }
        if cx.api_version < 2 {
            response.results = req
                .feature_updates
                .iter()
                .map(|u| {
                    let mut result = UpdatableFeatureResult::default();
                    result.feature = u.feature.clone();
                    result.error_message = Some(str_bytes("NONE"));
                    result
                })
                .collect();
        }
        response.into()
    }
}

/// Whether `feature` may be set to `level`: only to the level it is at.
fn check_update(node_id: i32, feature: &str, level: i16, transaction_version: i16) -> Result<(), String> {
    let Some(f) = FEATURES.iter().find(|f| f.name == feature) else {
        return Err(format!(
            "Invalid update version {level} for feature {feature}. Local controller {node_id} does not support this feature."
        ));
    };
    // Level 0 asks to disable (delete) a feature: in range, refused below as a change.
    if level < 0 || level > f.max_supported || (level < f.min_supported && level != 0) {
        return Err(format!(
            "Invalid update version {level} for feature {feature}. Local controller {node_id} only supports versions {}-{}",
            f.min_supported, f.max_supported
        ));
    }
    let current = finalized_level(f, transaction_version).unwrap_or(0);
    if level == current {
        return Ok(());
    }
    if f.name == TRANSACTION_VERSION {
        return Err(format!(
            "{feature} is at {current} in Kafgres and is changed by the setting kafgres.transaction_version (then \
             pg_reload_conf()), not by UpdateFeatures"
        ));
    }
    Err(format!(
        "{feature} is at {current} in Kafgres and cannot be changed: a node's feature levels are those of its build"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_current_level_is_accepted() {
        assert_eq!(check_update(1, "transaction.version", 2, 2), Ok(()));
        assert_eq!(check_update(1, "transaction.version", 1, 1), Ok(()));
        assert_eq!(check_update(1, "kraft.version", 0, 2), Ok(()));
        let change = check_update(1, "transaction.version", 1, 2).unwrap_err();
        assert!(change.contains("kafgres.transaction_version"), "{change}");
        let fixed = check_update(1, "group.version", 0, 2).unwrap_err();
        assert!(fixed.contains("cannot be changed"), "{fixed}");
        let beyond = check_update(1, "group.version", 5, 2).unwrap_err();
        assert!(beyond.ends_with("only supports versions 0-1"), "{beyond}");
        let unknown = check_update(3, "unknown.version", 1, 2).unwrap_err();
        assert!(unknown.ends_with("Local controller 3 does not support this feature."), "{unknown}");
    }

    #[test]
    fn features_are_in_name_order_and_finalized_within_their_range() {
        assert!(FEATURES.windows(2).all(|w| w[0].name < w[1].name));
        for f in FEATURES {
            assert!(f.finalized.is_none_or(|l| (f.min_supported..=f.max_supported).contains(&l)), "{f:?}");
        }
    }
}
