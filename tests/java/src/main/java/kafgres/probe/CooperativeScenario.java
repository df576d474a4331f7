package kafgres.probe;

import static kafgres.probe.Probe.await;
import static kafgres.probe.Probe.check;
import static kafgres.probe.Probe.line;

import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * An incremental (KIP-429, cooperative-sticky) rebalance with the classic protocol: member a alone
 * owns all PARTITIONS partitions; when member b joins, a revokes only the half that moves to b,
 * keeps the rest without a revoke, loses nothing, and both then read records of exactly the
 * partitions they own. Both members are polled in turn from this one thread (each poll is short).
 */
final class CooperativeScenario {
    private static final int PARTITIONS = 6;
    private static final int RECORDS_PER_PARTITION = 5;
    /** A new group's first rebalance waits the initial delay (3 s); two rebalances follow the join. */
    private static final Duration REBALANCE_TIMEOUT = Duration.ofSeconds(60);
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(10);

    private CooperativeScenario() {}

    /** What a member's rebalance listener saw, and what it owns now. */
    static void run(String bootstrap, String topic) throws Exception {
        String group = topic + "-group";
        try (Admin admin = Admin.create(Probe.config(bootstrap))) {
            await(admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all());
        }
        RebalanceMember a = new RebalanceMember("a", consumer(bootstrap, group), false);
        RebalanceMember b = new RebalanceMember("b", consumer(bootstrap, group), false);
        try {
            a.consumer.subscribe(List.of(topic), a);
            pollUntil(List.of(a), () -> a.owned.size() == PARTITIONS, "a owns every partition");
            line("a alone: owns %d partitions", a.owned.size());
            Set<Integer> before = new TreeSet<>(a.owned);

            b.consumer.subscribe(List.of(topic), b);
            pollUntil(List.of(a, b), () -> a.owned.size() == PARTITIONS / 2 && b.owned.size() == PARTITIONS / 2,
                    "a and b own half each");
            Set<Integer> union = new HashSet<>(a.owned);
            union.addAll(b.owned);
            check(union.size() == PARTITIONS, "a %s and b %s overlap", a.owned, b.owned);
            check(a.revoked.equals(b.owned), "a revoked %s but b owns %s", a.revoked, b.owned);
            Set<Integer> kept = new TreeSet<>(before);
            kept.removeAll(a.revoked);
            check(kept.equals(a.owned), "a kept %s, owns %s", kept, a.owned);
            line("b joins: a revoked %d (exactly what b owns), kept %d, lost %d; b revoked %d",
                    a.revoked.size(), a.owned.size(), a.lost.size() + b.lost.size(), b.revoked.size());
            line("partitions assigned twice: %d", a.reassignedOwned + b.reassignedOwned);

            produce(bootstrap, topic);
            pollUntil(List.of(a, b), () -> a.records.size() + b.records.size() >= PARTITIONS * RECORDS_PER_PARTITION,
                    "every record consumed");
            for (RebalanceMember m : List.of(a, b)) {
                Set<Integer> from = new TreeSet<>();
                m.records.forEach(r -> from.add(r.partition()));
                check(from.equals(m.owned), "%s read partitions %s but owns %s", m.name, from, m.owned);
            }
            line("consumed %d records, each member from exactly the partitions it owns",
                    a.records.size() + b.records.size());
        } finally {
            a.consumer.close(CloseOptions.timeout(CLOSE_TIMEOUT));
            b.consumer.close(CloseOptions.timeout(CLOSE_TIMEOUT));
        }
    }

    private static void pollUntil(List<RebalanceMember> members, BooleanSupplier done, String what) {
        RebalanceMember.pollUntil(members, done, REBALANCE_TIMEOUT, what);
    }

    private static void produce(String bootstrap, String topic) throws Exception {
        Properties props = Probe.config(bootstrap);
        props.put("enable.idempotence", "false");
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int p = 0; p < PARTITIONS; p++) {
                for (int i = 0; i < RECORDS_PER_PARTITION; i++) {
                    producer.send(new ProducerRecord<>(topic, p, null, "value-" + p + "-" + i));
                }
            }
            producer.flush();
        }
    }

    private static KafkaConsumer<String, String> consumer(String bootstrap, String group) {
        Properties props = Probe.config(bootstrap);
        props.put("group.id", group);
        props.put("group.protocol", "classic");
        props.put("partition.assignment.strategy", CooperativeStickyAssignor.class.getName());
        props.put("session.timeout.ms", "6000");
        props.put("heartbeat.interval.ms", "500");
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        return new KafkaConsumer<>(props);
    }
}
