//! Consumer groups, read-only: DescribeGroups and ListGroups.

use kafka_protocol::messages::{DescribeGroupsRequest, GroupId, ListGroupsRequest};
use kafka_protocol::protocol::StrBytes;

use super::{check_code, unexpected, Client};
use crate::error::ClientError;
use crate::wait::Wait;

/// A group as DescribeGroups shows it. A group the coordinator does not know
/// is `Dead` with no members (Kafka answers so rather than with an error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    pub group_id: String,
    /// Kafka's state name: Empty, PreparingRebalance, CompletingRebalance, Stable or Dead.
    pub state: String,
    /// "consumer" for consumer groups, empty for a group without members.
    pub protocol_type: String,
    /// The chosen assignor (e.g. "range"), empty outside Stable.
    pub protocol: String,
    pub members: usize,
    /// KIP-430's bit field of what this client may do with the group.
    pub authorized_operations: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: String,
}

impl<W: Wait> Client<W> {
    pub fn describe_group(&mut self, group: &str) -> Result<GroupInfo, ClientError> {
        let request = DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(StrBytes::from_string(group.to_owned()))])
            .with_include_authorized_operations(true);
        let response = self.call(&request)?;
        let [g] = response.groups.as_slice() else {
            return Err(unexpected("DescribeGroups", format_args!("has {} groups, not 1", response.groups.len())));
        };
        check_code("DescribeGroups", g.error_code, None, group)?;
        Ok(GroupInfo {
            group_id: g.group_id.to_string(),
            state: g.group_state.to_string(),
            protocol_type: g.protocol_type.to_string(),
            protocol: g.protocol_data.to_string(),
            members: g.members.len(),
            authorized_operations: g.authorized_operations,
        })
    }

    /// Every group the coordinator knows, in the broker's order.
    pub fn list_groups(&mut self) -> Result<Vec<ListedGroup>, ClientError> {
        let response = self.call(&ListGroupsRequest::default())?;
        check_code("ListGroups", response.error_code, None, "list groups")?;
        let groups = response.groups.iter().map(|g| ListedGroup {
            group_id: g.group_id.to_string(),
            protocol_type: g.protocol_type.to_string(),
            state: g.group_state.to_string(),
        });
        Ok(groups.collect())
    }
}
