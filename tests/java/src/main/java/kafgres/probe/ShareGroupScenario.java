package kafgres.probe;

import static kafgres.probe.Probe.await;
import static kafgres.probe.Probe.check;
import static kafgres.probe.Probe.line;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
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
 * Share groups (KIP-932) with the Java KafkaShareConsumer: the group's share.auto.offset.reset is
 * set to earliest with the Admin client (IncrementalAlterConfigs on a GROUP resource) and described;
 * two members polled in turn read RECORDS records of a 2-partition topic, each record once
 * (implicit acknowledgement); a third member in explicit mode releases a record and gets it again
 * with delivery count 2, then accepts it; once all closed, the group is described Empty.
 */
final class ShareGroupScenario {
    private static final int PARTITIONS = 2;
    private static final int RECORDS = 20;
    private static final Duration POLL = Duration.ofMillis(500);
    private static final Duration READ_TIMEOUT = Duration.ofSeconds(60);

    private ShareGroupScenario() {}

    static void run(String bootstrap, String topic) throws Exception {
        String group = topic + "-group";
        try (Admin admin = Admin.create(Probe.config(bootstrap))) {
            await(admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all());
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            AlterConfigOp earliest =
                    new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET);
            await(admin.incrementalAlterConfigs(Map.of(resource, List.of(earliest))).all());
            ConfigEntry entry = await(admin.describeConfigs(List.of(resource)).all()).get(resource)
                    .get("share.auto.offset.reset");
            line("group config share.auto.offset.reset=%s (%s)", entry.value(), entry.source());

            produce(bootstrap, topic, "r", RECORDS);
            List<String> read = new ArrayList<>();
            try (KafkaShareConsumer<String, String> a = member(bootstrap, group, "implicit");
                    KafkaShareConsumer<String, String> b = member(bootstrap, group, "implicit")) {
                a.subscribe(List.of(topic));
                b.subscribe(List.of(topic));
                long deadline = System.nanoTime() + READ_TIMEOUT.toNanos();
                while (read.size() < RECORDS && System.nanoTime() < deadline) {
                    for (KafkaShareConsumer<String, String> member : List.of(a, b)) {
                        for (ConsumerRecord<String, String> r : member.poll(POLL)) {
                            read.add(r.value());
                        }
                    }
                }
                a.commitSync();
                b.commitSync();
            }
            Set<String> distinct = new TreeSet<>(read);
            check(read.size() == RECORDS && distinct.size() == RECORDS, "read %s", read);
            line("two members read %d records, %d distinct", read.size(), distinct.size());

            produce(bootstrap, topic, "again", 1);
            try (KafkaShareConsumer<String, String> c = member(bootstrap, group, "explicit")) {
                c.subscribe(List.of(topic));
                ConsumerRecord<String, String> first = pollOne(c);
                c.acknowledge(first, AcknowledgeType.RELEASE);
                c.commitSync();
                ConsumerRecord<String, String> second = pollOne(c);
                check(second.offset() == first.offset(), "a different record came back: %s", second);
                line("released %s came back, delivery count %s", second.value(), second.deliveryCount().orElse((short) -1));
                c.acknowledge(second, AcknowledgeType.ACCEPT);
                c.commitSync();
            }

            ShareGroupDescription described = Probe.settle(
                    () -> await(admin.describeShareGroups(List.of(group)).all()).get(group),
                    d -> d.members().isEmpty());
            line("after close: state=%s members=%d", described.groupState(), described.members().size());
        }
    }

    private static KafkaShareConsumer<String, String> member(String bootstrap, String group, String mode) {
        Properties props = Probe.config(bootstrap);
        props.put("group.id", group);
        props.put("share.acknowledgement.mode", mode);
        return new KafkaShareConsumer<>(props, new StringDeserializer(), new StringDeserializer());
    }

    private static ConsumerRecord<String, String> pollOne(KafkaShareConsumer<String, String> c) {
        long deadline = System.nanoTime() + READ_TIMEOUT.toNanos();
        while (System.nanoTime() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                return r;
            }
        }
        throw new Probe.CheckFailed("no record within " + READ_TIMEOUT);
    }

    private static void produce(String bootstrap, String topic, String prefix, int count) throws Exception {
        try (KafkaProducer<String, String> producer =
                new KafkaProducer<>(Probe.config(bootstrap), new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, i % PARTITIONS, prefix + "-k" + i, prefix + "-" + i)).get();
            }
        }
    }
}
