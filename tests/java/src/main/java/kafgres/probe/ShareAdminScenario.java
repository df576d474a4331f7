package kafgres.probe;

import static kafgres.probe.Probe.await;
import static kafgres.probe.Probe.check;
import static kafgres.probe.Probe.line;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Share-group administration (KIP-932), in steps that tests/e2e/test_share_groups_admin.py runs
 * between kafka-share-groups.sh commands. Topic NAME has one partition; the group is NAME-group and
 * reads from the earliest offset (its share.auto.offset.reset config).
 *
 * <ul>
 *   <li>{@code share-admin-consume}: creates the topic, produces RECORDS records, and one share
 *       consumer reads (and accepts) them all, then closes: the group is Empty;
 *   <li>{@code share-admin-member}: one share consumer joins, prints "joined" once it is assigned the
 *       partition, and stays (polling) for HOLD, so that the tool can describe a live member;
 *   <li>{@code share-admin-reset}: Admin.alterShareGroupOffsets to the earliest offset (what
 *       kafka-share-groups.sh --reset-offsets --to-earliest sends from Kafka 4.2 on), then a share
 *       consumer reads every record again;
 *   <li>{@code share-admin-reread}: a share consumer reads what the group gives it, to show that after
 *       --reset-offsets or --delete-offsets the group starts again where it was set.
 * </ul>
 */
final class ShareAdminScenario {
    static final int RECORDS = 10;
    private static final Duration POLL = Duration.ofMillis(500);
    private static final Duration DEADLINE = Duration.ofSeconds(60);
    /** How long a member stays for the tool to describe it. */
    private static final Duration HOLD = Duration.ofSeconds(25);

    private ShareAdminScenario() {}

    static void consume(String bootstrap, String topic) throws Exception {
        try (Admin admin = Admin.create(Probe.config(bootstrap))) {
            await(admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all());
            ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, group(topic));
            await(admin.incrementalAlterConfigs(Map.of(group, List.of(new AlterConfigOp(
                    new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET)))).all());
        }
        Properties p = Probe.config(bootstrap);
        try (KafkaProducer<String, String> producer =
                new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < RECORDS; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, "r-" + i)).get();
            }
        }
        line("consumed: %s", readAll(bootstrap, topic));
    }

    static void member(String bootstrap, String topic) throws Exception {
        try (Admin admin = Admin.create(Probe.config(bootstrap));
                KafkaShareConsumer<String, String> c = consumer(bootstrap, topic)) {
            c.subscribe(List.of(topic));
            // A share consumer does not tell its assignment: the group's description does.
            Instant deadline = Instant.now().plus(DEADLINE);
            boolean assigned = false;
            while (!assigned && Instant.now().isBefore(deadline)) {
                c.poll(POLL);
                ShareGroupDescription d =
                        await(admin.describeShareGroups(List.of(group(topic))).describedGroups().get(group(topic)));
                assigned = d.members().size() == 1
                        && !d.members().iterator().next().assignment().topicPartitions().isEmpty();
            }
            check(assigned, "never assigned a partition of %s", topic);
            line("joined");
            System.out.flush();
            Instant leave = Instant.now().plus(HOLD);
            while (Instant.now().isBefore(leave)) {
                c.poll(POLL);
            }
        }
        line("left");
    }

    static void reset(String bootstrap, String topic) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = Admin.create(Probe.config(bootstrap))) {
            ListOffsetsResultInfo earliest = await(admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).all()).get(tp);
            await(admin.alterShareGroupOffsets(group(topic), Map.of(tp, earliest.offset())).all());
            line("reset to earliest: %d", earliest.offset());
        }
        line("after reset: %s", readAll(bootstrap, topic));
    }

    static void reread(String bootstrap, String topic) throws Exception {
        line("read again: %s", readAll(bootstrap, topic));
    }

    /** Reads until every record was seen once (accepting each), then closes; says what it read. */
    private static String readAll(String bootstrap, String topic) throws Exception {
        List<String> seen = new ArrayList<>();
        try (KafkaShareConsumer<String, String> c = consumer(bootstrap, topic)) {
            c.subscribe(List.of(topic));
            Instant deadline = Instant.now().plus(DEADLINE);
            while (new TreeSet<>(seen).size() < RECORDS && Instant.now().isBefore(deadline)) {
                for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                    seen.add(r.value() + "#" + r.deliveryCount().orElse((short) -1));
                }
                c.commitSync();
            }
        }
        check(new TreeSet<>(seen).size() == RECORDS, "read %s, not all %d records", new TreeSet<>(seen), RECORDS);
        long first = seen.stream().filter(s -> s.endsWith("#1")).count();
        return String.format("%d records, %d distinct, %d first deliveries", seen.size(), new TreeSet<>(seen).size(),
                first);
    }

    private static String group(String topic) {
        return topic + "-group";
    }

    private static KafkaShareConsumer<String, String> consumer(String bootstrap, String topic) {
        Properties p = Probe.config(bootstrap);
        p.put("group.id", group(topic));
        return new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }
}
