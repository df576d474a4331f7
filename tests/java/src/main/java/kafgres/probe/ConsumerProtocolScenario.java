package kafgres.probe;

import static kafgres.probe.Probe.await;
import static kafgres.probe.Probe.check;
import static kafgres.probe.Probe.line;

import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The consumer group protocol of KIP-848 (`group.protocol=consumer`): the broker assigns. RebalanceMember a
 * alone owns all PARTITIONS partitions; b joins and a revokes exactly what moves to b; c joins and
 * the three own two each; b closes (leaves) and a and c split its partitions. Every record is read
 * once, with offsets committed synchronously after each poll (OffsetCommit v9 with the member
 * epoch). The Admin client describes the group through ConsumerGroupDescribe. After everyone
 * closed, a new member resumes after the committed offsets. Members are polled in turn from this
 * one thread.
 */
final class ConsumerProtocolScenario {
    private static final int PARTITIONS = 6;
    private static final int RECORDS_PER_PARTITION = 5;
    /** Members learn of a new target at their next heartbeat (every 5 s at most). */
    private static final Duration REBALANCE_TIMEOUT = Duration.ofSeconds(60);
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(10);

    private ConsumerProtocolScenario() {}

    static void run(String bootstrap, String topic) throws Exception {
        String group = topic + "-group";
        try (Admin admin = Admin.create(Probe.config(bootstrap))) {
            await(admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all());
            produce(bootstrap, topic, "first");

            RebalanceMember a = new RebalanceMember("a", consumer(bootstrap, group), true);
            RebalanceMember b = new RebalanceMember("b", consumer(bootstrap, group), true);
            RebalanceMember c = new RebalanceMember("c", consumer(bootstrap, group), true);
            try {
                a.consumer.subscribe(List.of(topic), a);
                pollUntil(List.of(a), () -> a.owned.size() == PARTITIONS, "a owns every partition");
                line("a alone: owns %d partitions", a.owned.size());
                Set<Integer> before = new TreeSet<>(a.owned);

                b.consumer.subscribe(List.of(topic), b);
                pollUntil(List.of(a, b), () -> a.owned.size() == 3 && b.owned.size() == 3, "a and b own 3 each");
                check(disjoint(a, b), "a %s and b %s overlap", a.owned, b.owned);
                check(a.revoked.equals(b.owned), "a revoked %s but b owns %s", a.revoked, b.owned);
                Set<Integer> kept = new TreeSet<>(before);
                kept.removeAll(a.revoked);
                check(kept.equals(a.owned), "a kept %s, owns %s", kept, a.owned);
                line("b joins: a revoked exactly what b owns (%d), kept %d", a.revoked.size(), a.owned.size());

                c.consumer.subscribe(List.of(topic), c);
                pollUntil(List.of(a, b, c), () -> a.owned.size() == 2 && b.owned.size() == 2 && c.owned.size() == 2,
                        "a, b and c own 2 each");
                check(disjoint(a, b) && disjoint(a, c) && disjoint(b, c), "overlap: a %s b %s c %s",
                        a.owned, b.owned, c.owned);
                line("c joins: 2 partitions each, lost %d", a.lost.size() + b.lost.size() + c.lost.size());

                ConsumerGroupDescription described = describe(admin, group);
                line("described: type=%s state=%s members=%d assignor=%s", described.type(),
                        described.groupState(), described.members().size(), described.partitionAssignor());
                Set<Integer> assigned = new TreeSet<>();
                for (MemberDescription m : described.members()) {
                    m.assignment().topicPartitions().forEach(tp -> assigned.add(tp.partition()));
                    check(m.memberEpoch().orElse(-1) > 0, "member epoch %s", m.memberEpoch());
                }
                line("described assignments cover %d partitions", assigned.size());

                pollUntil(List.of(a, b, c), () -> total(a, b, c) >= PARTITIONS * RECORDS_PER_PARTITION,
                        "every first record consumed");
                line("first records: %d read, %d distinct", total(a, b, c), distinct(a, b, c));

                Set<Integer> bHad = new TreeSet<>(b.owned);
                b.consumer.close(CloseOptions.timeout(CLOSE_TIMEOUT));
                pollUntil(List.of(a, c), () -> a.owned.size() == 3 && c.owned.size() == 3, "a and c own 3 each");
                Set<Integer> taken = new HashSet<>(a.owned);
                taken.addAll(c.owned);
                check(taken.size() == PARTITIONS && taken.containsAll(bHad), "a %s c %s after b left with %s",
                        a.owned, c.owned, bHad);
                line("b leaves: a and c own 3 each");
            } finally {
                for (RebalanceMember m : List.of(a, c)) {
                    m.consumer.close(CloseOptions.timeout(CLOSE_TIMEOUT));
                }
            }

            produce(bootstrap, topic, "second");
            RebalanceMember d = new RebalanceMember("d", consumer(bootstrap, group), true);
            try {
                d.consumer.subscribe(List.of(topic), d);
                pollUntil(List.of(d), () -> d.records.size() >= PARTITIONS * RECORDS_PER_PARTITION,
                        "d reads the second records");
                long second = d.records.stream().filter(r -> r.value().startsWith("second-")).count();
                line("d resumes after the commits: %d records, %d of the second batch", d.records.size(), second);
            } finally {
                d.consumer.close(CloseOptions.timeout(CLOSE_TIMEOUT));
            }
            ConsumerGroupDescription empty = describe(admin, group);
            line("after close: state=%s members=%d", empty.groupState(), empty.members().size());
        }
    }

    private static ConsumerGroupDescription describe(Admin admin, String group) throws Exception {
        Map<String, ConsumerGroupDescription> all = await(admin.describeConsumerGroups(List.of(group)).all());
        return all.get(group);
    }

    private static boolean disjoint(RebalanceMember x, RebalanceMember y) {
        Set<Integer> both = new HashSet<>(x.owned);
        both.retainAll(y.owned);
        return both.isEmpty();
    }

    private static int total(RebalanceMember... members) {
        int n = 0;
        for (RebalanceMember m : members) {
            n += m.records.size();
        }
        return n;
    }

    private static int distinct(RebalanceMember... members) {
        Set<String> seen = new HashSet<>();
        for (RebalanceMember m : members) {
            m.records.forEach(r -> seen.add(r.partition() + "/" + r.offset()));
        }
        return seen.size();
    }

    private static void pollUntil(List<RebalanceMember> members, BooleanSupplier done, String what) {
        RebalanceMember.pollUntil(members, done, REBALANCE_TIMEOUT, what);
    }

    private static void produce(String bootstrap, String topic, String prefix) throws Exception {
        Properties props = Probe.config(bootstrap);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int p = 0; p < PARTITIONS; p++) {
                for (int i = 0; i < RECORDS_PER_PARTITION; i++) {
                    producer.send(new ProducerRecord<>(topic, p, null, prefix + "-" + p + "-" + i));
                }
            }
            producer.flush();
        }
    }

    private static KafkaConsumer<String, String> consumer(String bootstrap, String group) {
        Properties props = Probe.config(bootstrap);
        props.put("group.id", group);
        props.put("group.protocol", "consumer");
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        return new KafkaConsumer<>(props);
    }
}
