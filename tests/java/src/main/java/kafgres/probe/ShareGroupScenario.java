package kafgres.probe;

import static kafgres.probe.Probe.await;
import static kafgres.probe.Probe.check;
import static kafgres.probe.Probe.line;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Share groups (KIP-932, queues for Kafka) with the Java KafkaShareConsumer. The group reads from the
 * earliest offset (the group config share.auto.offset.reset, set with the Admin client). Two consumers
 * in implicit acknowledgement mode split RECORDS records of a two-partition topic: every record is
 * delivered once, to one of them. Then a consumer in explicit mode acknowledges three new records
 * differently: the accepted one is done, the released one comes back with delivery count 2 and is
 * accepted, the rejected one is never delivered again. The Admin client describes the group, and once
 * every consumer closed, finds it Empty.
 */
final class ShareGroupScenario {
    private static final int PARTITIONS = 2;
    private static final int RECORDS = 40;
    private static final Duration POLL = Duration.ofMillis(500);
    private static final Duration DEADLINE = Duration.ofSeconds(60);
    /** How long the explicit consumer polls to show that a rejected record never comes back. */
    private static final Duration QUIET = Duration.ofSeconds(3);

    private ShareGroupScenario() {}

    static void run(String bootstrap, String topic) throws Exception {
        String group = topic + "-group";
        try (Admin admin = Admin.create(Probe.config(bootstrap))) {
            await(admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all());
            ConfigResource groupResource = new ConfigResource(ConfigResource.Type.GROUP, group);
            await(admin.incrementalAlterConfigs(Map.of(groupResource, List.of(new AlterConfigOp(
                    new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET)))).all());
            ConfigEntry entry = await(admin.describeConfigs(List.of(groupResource)).all()).get(groupResource)
                    .get("share.auto.offset.reset");
            line("group config share.auto.offset.reset=%s (%s)", entry.value(), entry.source());
            produce(bootstrap, topic, "r", RECORDS);

            List<String> seen = new ArrayList<>();
            Map<String, Integer> perConsumer = new HashMap<>();
            try (KafkaShareConsumer<String, String> a = consumer(bootstrap, group, "implicit");
                    KafkaShareConsumer<String, String> b = consumer(bootstrap, group, "implicit")) {
                a.subscribe(List.of(topic));
                b.subscribe(List.of(topic));
                Instant deadline = Instant.now().plus(DEADLINE);
                while (new TreeSet<>(seen).size() < RECORDS && Instant.now().isBefore(deadline)) {
                    for (Map.Entry<String, KafkaShareConsumer<String, String>> c : Map.of("a", a, "b", b).entrySet()) {
                        for (ConsumerRecord<String, String> r : c.getValue().poll(POLL)) {
                            seen.add(r.value());
                            perConsumer.merge(c.getKey(), 1, Integer::sum);
                        }
                    }
                }
                a.commitSync();
                b.commitSync();
                ShareGroupDescription described =
                        await(admin.describeShareGroups(List.of(group)).describedGroups().get(group));
                line("described: state=%s members=%d", described.groupState(), described.members().size());
            }
            check(new TreeSet<>(seen).size() == RECORDS, "read %d distinct of %d: %s", new TreeSet<>(seen).size(),
                    RECORDS, new TreeSet<>(seen));
            line("implicit: %d records delivered, %d distinct, %d delivered twice", seen.size(),
                    new TreeSet<>(seen).size(), seen.size() - new TreeSet<>(seen).size());

            produce(bootstrap, topic, "x", 3);
            try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group, "explicit")) {
                c.subscribe(List.of(topic));
                // Each record is acknowledged in the poll that delivered it (explicit mode requires it):
                // x-0 accepted, x-1 released the first time and accepted the second, x-2 rejected.
                List<String> deliveries = new ArrayList<>();
                Instant deadline = Instant.now().plus(DEADLINE);
                while (!deliveries.containsAll(List.of("x-0#1", "x-1#2", "x-2#1")) && Instant.now().isBefore(deadline)) {
                    for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                        int count = r.deliveryCount().orElse((short) -1);
                        deliveries.add(r.value() + "#" + count);
                        AcknowledgeType type = switch (r.value()) {
                            case "x-1" -> count == 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT;
                            case "x-2" -> AcknowledgeType.REJECT;
                            default -> AcknowledgeType.ACCEPT;
                        };
                        c.acknowledge(r, type);
                    }
                    c.commitSync();
                }
                line("explicit: deliveries (value#delivery count) %s", new TreeSet<>(deliveries));
                check(new TreeSet<>(deliveries).equals(new TreeSet<>(List.of("x-0#1", "x-1#1", "x-1#2", "x-2#1"))),
                        "deliveries %s", deliveries);
                List<String> after = new ArrayList<>();
                Instant quiet = Instant.now().plus(QUIET);
                while (Instant.now().isBefore(quiet)) {
                    for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                        after.add(r.value());
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                }
                line("explicit: after accept, release then accept, and reject: %d more delivered %s", after.size(),
                        after);
            }
            ShareGroupDescription closed = Probe.settle(
                    () -> await(admin.describeShareGroups(List.of(group)).describedGroups().get(group)),
                    d -> d.members().isEmpty());
            line("after close: state=%s members=%d", closed.groupState(), closed.members().size());
        }
    }

    private static KafkaShareConsumer<String, String> consumer(String bootstrap, String group, String mode) {
        Properties p = Probe.config(bootstrap);
        p.put("group.id", group);
        p.put("share.acknowledgement.mode", mode);
        return new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    private static void produce(String bootstrap, String topic, String tag, int count) throws Exception {
        Properties p = Probe.config(bootstrap);
        try (KafkaProducer<String, String> producer =
                new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, i % PARTITIONS, null, tag + "-" + i)).get();
            }
        }
    }
}
