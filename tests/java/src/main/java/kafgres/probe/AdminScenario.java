package kafgres.probe;

import static kafgres.probe.Probe.await;
import static kafgres.probe.Probe.line;
import static kafgres.probe.Probe.outcome;
import static kafgres.probe.Probe.settle;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;

/**
 * The AdminClient's topic and cluster calls: CreateTopics (and again, for TopicExistsException),
 * Metadata through listTopics and describeTopics, DescribeCluster, DescribeConfigs,
 * CreatePartitions (and a non-increase, for InvalidPartitionsException), DeleteTopics (and again,
 * for UnknownTopicOrPartitionException).
 */
final class AdminScenario {
    private static final int PARTITIONS = 3;
    private static final int PARTITIONS_AFTER = 4;

    private AdminScenario() {}

    static void run(String bootstrap, String topic) throws Exception {
        try (Admin admin = Admin.create(Probe.config(bootstrap))) {
            CreateTopicsResult created = admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1)));
            await(created.all());
            Uuid topicId = await(created.topicId(topic));
            Config createdConfig = await(created.config(topic));
            line("create-topics: ok partitions=%d replication-factor=%d topic-id-set=%b",
                    await(created.numPartitions(topic)), await(created.replicationFactor(topic)), isSet(topicId));
            // CreateTopics v5+ (KIP-525) answers with the new topic's configuration.
            line("create-topics: returned config %s", describe(createdConfig, "retention.ms"));

            Set<String> names = settle(() -> await(admin.listTopics().names()), n -> n.contains(topic));
            line("list-topics: includes topic=%b", names.contains(topic));

            line("create-topics again: %s",
                    outcome(admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all()));

            TopicDescription description = describe(admin, topic, PARTITIONS);
            line("describe-topics: partitions=%d internal=%b topic-id-set=%b topic-id-as-created=%b",
                    description.partitions().size(), description.isInternal(), isSet(description.topicId()),
                    topicId.equals(description.topicId()));
            for (TopicPartitionInfo p : description.partitions()) {
                line("describe-topics: partition=%d leader=%s replicas=%s isr=%s",
                        p.partition(), nodeId(p.leader()), nodeIds(p.replicas()), nodeIds(p.isr()));
            }

            DescribeClusterResult cluster = admin.describeCluster();
            List<Node> nodes = List.copyOf(await(cluster.nodes()));
            String clusterId = await(cluster.clusterId());
            line("describe-cluster: nodes=%d node=%s endpoint=%s cluster-id-set=%b controller=%s",
                    nodes.size(), nodes.isEmpty() ? "none" : nodeId(nodes.get(0)),
                    nodes.isEmpty() ? "none" : nodes.get(0).host() + ":" + nodes.get(0).port(),
                    clusterId != null && !clusterId.isEmpty(), nodeId(await(cluster.controller())));

            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config config = await(admin.describeConfigs(List.of(resource)).all()).get(resource);
            for (String name : List.of("retention.ms", "cleanup.policy")) {
                line("describe-configs: %s", describe(config, name));
            }

            line("create-partitions: increase to %d: %s", PARTITIONS_AFTER,
                    outcome(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(PARTITIONS_AFTER))).all()));
            TopicDescription grown = describe(admin, topic, PARTITIONS_AFTER);
            line("describe-topics: partitions=%d leaders=%s", grown.partitions().size(),
                    grown.partitions().stream().map(p -> nodeId(p.leader())).collect(Collectors.joining(",")));
            line("create-partitions: increase to %d again: %s", PARTITIONS_AFTER,
                    outcome(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(PARTITIONS_AFTER))).all()));

            line("delete-topics: %s", outcome(admin.deleteTopics(List.of(topic)).all()));
            names = settle(() -> await(admin.listTopics().names()), n -> !n.contains(topic));
            line("list-topics: includes topic=%b", names.contains(topic));
            line("delete-topics again: %s", outcome(admin.deleteTopics(List.of(topic)).all()));
        }
    }

    /** describeTopics, re-read until it shows `partitions` partitions or the settle time passed. */
    private static TopicDescription describe(Admin admin, String topic, int partitions) throws Exception {
        return settle(() -> await(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic),
                d -> d.partitions().size() == partitions);
    }

    private static boolean isSet(Uuid id) {
        return id != null && !Uuid.ZERO_UUID.equals(id);
    }

    /** "name=value source=S read-only=B sensitive=B", or "name missing". */
    private static String describe(Config config, String name) {
        ConfigEntry entry = config.get(name);
        if (entry == null) {
            return name + " missing";
        }
        return String.format("%s=%s source=%s read-only=%b sensitive=%b",
                name, entry.value(), entry.source(), entry.isReadOnly(), entry.isSensitive());
    }

    private static String nodeId(Node node) {
        return node == null || node.isEmpty() ? "none" : node.idString();
    }

    private static String nodeIds(List<Node> nodes) {
        return nodes.stream().map(AdminScenario::nodeId).collect(Collectors.joining(","));
    }
}
