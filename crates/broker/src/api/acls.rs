//! DescribeAcls, CreateAcls and DeleteAcls: the bindings of `kafgres.acls`,
//! managed as Kafka's `kafka-acls.sh` manages them. Describing needs DESCRIBE
//! on the cluster, changing needs ALTER; without an authorizer each answers
//! SECURITY_DISABLED, as Kafka does (MirrorMaker 2's ACL sync expects it).

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest,
    DescribeAclsResponse,
};

use super::authorized_operations::CLUSTER_REFUSED;
use super::handler::{Answer, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::acl::{AclAdmin, AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType};

/// Kafka's message for every ACL request while no authorizer is configured.
const NO_AUTHORIZER: &str = "No Authorizer is configured.";

/// v1-v3: Kafka 4 removed v0 (KIP-896); v1 adds pattern types (KIP-290),
/// v2 is flexible.
const ACL_VERSIONS: Versions = Versions::new(1, 3);

pub struct DescribeAcls;

impl Handler for DescribeAcls {
    const KEY: ApiKey = ApiKey::DescribeAcls;
    const VERSIONS: Versions = ACL_VERSIONS;
    type Request = DescribeAclsRequest;
    type Response = DescribeAclsResponse;
    type Services<'a> = &'a AclAdmin;

    async fn handle(
        admin: Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: DescribeAclsRequest,
    ) -> Answer<DescribeAclsResponse> {
        let failed = |code: i16, message: &str| {
            DescribeAclsResponse::default().with_error_code(code).with_error_message(Some(str_bytes(message))).into()
        };
        if let Some((code, message)) = refusal(admin, cx, Operation::Describe) {
            return failed(code, message);
        }
        let filter = match filter_of(
            request.resource_type_filter,
            request.resource_name_filter.as_deref(),
            request.pattern_type_filter,
            request.principal_filter.as_deref(),
            request.host_filter.as_deref(),
            request.operation,
            request.permission_type,
        ) {
            Ok(filter) => filter,
            Err(reason) => return failed(error_code::INVALID_REQUEST, &reason),
        };
        let mut resources: Vec<DescribeAclsResource> = Vec::new();
        // The rule set is ordered by resource first, so one resource's ACLs are adjacent.
        for b in admin.authorizer().rules().matching(&filter) {
            let same = resources.last().is_some_and(|r| {
                r.resource_type == b.resource_type.code()
                    && r.pattern_type == b.pattern_type.code()
                    && *r.resource_name == *b.resource_name
            });
            if !same {
                resources.push(
                    DescribeAclsResource::default()
                        .with_resource_type(b.resource_type.code())
                        .with_resource_name(str_bytes(&b.resource_name))
                        .with_pattern_type(b.pattern_type.code()),
                );
            }
            if let Some(r) = resources.last_mut() {
                r.acls.push(
                    AclDescription::default()
                        .with_principal(str_bytes(&b.principal))
                        .with_host(str_bytes(&b.host))
                        .with_operation(b.operation.code())
                        .with_permission_type(b.permission.code()),
                );
            }
        }
        DescribeAclsResponse::default().with_resources(resources).into()
    }
}

pub struct CreateAcls;

impl Handler for CreateAcls {
    const KEY: ApiKey = ApiKey::CreateAcls;
    const VERSIONS: Versions = ACL_VERSIONS;
    type Request = CreateAclsRequest;
    type Response = CreateAclsResponse;
    type Services<'a> = &'a AclAdmin;

    async fn handle(
        admin: Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: CreateAclsRequest,
    ) -> Answer<CreateAclsResponse> {
        let all = |code: i16, message: &str| {
            let result =
                AclCreationResult::default().with_error_code(code).with_error_message(Some(str_bytes(message)));
            CreateAclsResponse::default().with_results(vec![result; request.creations.len()]).into()
        };
        if let Some((code, message)) = refusal(admin, cx, Operation::Alter) {
            return all(code, message);
        }
        let mut results = Vec::with_capacity(request.creations.len());
        let mut valid = Vec::new();
        for c in &request.creations {
            let binding = binding_of(c);
            match binding.as_ref().map_err(Clone::clone).and_then(|b| b.validate().map_err(|e| e.0)) {
                Ok(()) => {
                    results.push(Ok(valid.len()));
                    valid.extend(binding.ok());
                }
                Err(reason) => results.push(Err(reason)),
            }
        }
        let stored = if valid.is_empty() { Ok(()) } else { admin.create(valid).await };
        let results = results
            .into_iter()
            .map(|r| match (r, &stored) {
                (Ok(_), Ok(())) => AclCreationResult::default(),
                (Ok(_), Err(e)) => AclCreationResult::default()
                    .with_error_code(error_code::UNKNOWN_SERVER_ERROR)
                    .with_error_message(Some(str_bytes(&e.to_string()))),
                (Err(reason), _) => AclCreationResult::default()
                    .with_error_code(error_code::INVALID_REQUEST)
                    .with_error_message(Some(str_bytes(&reason))),
            })
            .collect();
        CreateAclsResponse::default().with_results(results).into()
    }
}

pub struct DeleteAcls;

impl Handler for DeleteAcls {
    const KEY: ApiKey = ApiKey::DeleteAcls;
    const VERSIONS: Versions = ACL_VERSIONS;
    type Request = DeleteAclsRequest;
    type Response = DeleteAclsResponse;
    type Services<'a> = &'a AclAdmin;

    async fn handle(
        admin: Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: DeleteAclsRequest,
    ) -> Answer<DeleteAclsResponse> {
        let all = |code: i16, message: &str| {
            let result =
                DeleteAclsFilterResult::default().with_error_code(code).with_error_message(Some(str_bytes(message)));
            DeleteAclsResponse::default().with_filter_results(vec![result; request.filters.len()]).into()
        };
        if let Some((code, message)) = refusal(admin, cx, Operation::Alter) {
            return all(code, message);
        }
        let parsed: Vec<Result<AclFilter, String>> = request
            .filters
            .iter()
            .map(|f| {
                filter_of(
                    f.resource_type_filter,
                    f.resource_name_filter.as_deref(),
                    f.pattern_type_filter,
                    f.principal_filter.as_deref(),
                    f.host_filter.as_deref(),
                    f.operation,
                    f.permission_type,
                )
            })
            .collect();
        let valid: Vec<AclFilter> = parsed.iter().filter_map(|p| p.as_ref().ok().cloned()).collect();
        let deleted = admin.delete(&valid).await;
        let mut matches = match &deleted {
            Ok(m) => m.clone().into_iter(),
            Err(_) => Vec::new().into_iter(),
        };
        let results = parsed
            .into_iter()
            .map(|p| match (p, &deleted) {
                (Err(reason), _) => DeleteAclsFilterResult::default()
                    .with_error_code(error_code::INVALID_REQUEST)
                    .with_error_message(Some(str_bytes(&reason))),
                (Ok(_), Err(e)) => DeleteAclsFilterResult::default()
                    .with_error_code(error_code::UNKNOWN_SERVER_ERROR)
                    .with_error_message(Some(str_bytes(&e.to_string()))),
                (Ok(_), Ok(_)) => DeleteAclsFilterResult::default()
                    .with_matching_acls(matches.next().unwrap_or_default().iter().map(matching_acl).collect()),
            })
            .collect();
        DeleteAclsResponse::default().with_filter_results(results).into()
    }
}

/// Why an ACL request is refused whole, if it is: no authorizer
/// (SECURITY_DISABLED), or not `operation` on the cluster (DESCRIBE to
/// list, ALTER to change).
fn refusal(admin: &AclAdmin, cx: &RequestContext<'_>, operation: Operation) -> Option<(i16, &'static str)> {
    if !admin.authorizer().enabled() {
        Some((error_code::SECURITY_DISABLED, NO_AUTHORIZER))
    } else if !cx.may_on_cluster(operation) {
        Some((error_code::CLUSTER_AUTHORIZATION_FAILED, CLUSTER_REFUSED))
    } else {
        None
    }
}

fn matching_acl(b: &AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(b.resource_type.code())
        .with_resource_name(str_bytes(&b.resource_name))
        .with_pattern_type(b.pattern_type.code())
        .with_principal(str_bytes(&b.principal))
        .with_host(str_bytes(&b.host))
        .with_operation(b.operation.code())
        .with_permission_type(b.permission.code())
}

fn binding_of(c: &kafka_protocol::messages::create_acls_request::AclCreation) -> Result<AclBinding, String> {
    Ok(AclBinding {
        resource_type: ResourceType::from_code(c.resource_type).ok_or("Invalid resourceType")?,
        resource_name: c.resource_name.to_string(),
        pattern_type: PatternType::from_code(c.resource_pattern_type).ok_or("Invalid patternType")?,
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: Operation::from_code(c.operation).ok_or("Invalid operation")?,
        permission: Permission::from_code(c.permission_type).ok_or("Invalid permissionType")?,
    })
}

/// A filter from its wire fields; INVALID_REQUEST's message when a code is
/// not one Kafka defines or a field is UNKNOWN.
fn filter_of(
    resource_type: i8,
    resource_name: Option<&str>,
    pattern_type: i8,
    principal: Option<&str>,
    host: Option<&str>,
    operation: i8,
    permission: i8,
) -> Result<AclFilter, String> {
    let filter = AclFilter {
        resource_type: ResourceType::from_code(resource_type).unwrap_or(ResourceType::Unknown),
        resource_name: resource_name.map(str::to_owned),
        pattern_type: PatternType::from_code(pattern_type).unwrap_or(PatternType::Unknown),
        principal: principal.map(str::to_owned),
        host: host.map(str::to_owned),
        operation: Operation::from_code(operation).unwrap_or(Operation::Unknown),
        permission: Permission::from_code(permission).unwrap_or(Permission::Unknown),
    };
    match filter.unknown_field() {
        Some(reason) => Err(reason.to_owned()),
        None => Ok(filter),
    }
}
