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
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Share consumers at ShareFetch/ShareAcknowledge v2 (Kafka 4.2+): KIP-1206's acquire mode and KIP-1222's
 * lock renewal. Consumer a (explicit acknowledgement, {@code share.acquire.mode=record_limit},
 * {@code max.poll.records=3}) acquires at most 3 of RECORDS records in one poll; it then renews their
 * locks (AcknowledgeType.RENEW) every RENEW_EVERY, each time getting the same records back from poll
 * with their delivery count unchanged, for longer than the group's lock duration (LOCK, Kafka's
 * minimum). Meanwhile consumer b (implicit) takes the other records and never one of a's. Once a accepts
 * them, nothing is delivered again.
 */
final class ShareRenewScenario {
    private static final int RECORDS = 10;
    private static final int MAX_POLL_RECORDS = 3;
    private static final Duration LOCK = Duration.ofSeconds(15);
    private static final Duration RENEW_EVERY = Duration.ofSeconds(5);
    private static final int RENEWALS = 4; // 20 s: past the lock of the first acquisition
    private static final Duration POLL = Duration.ofMillis(250);
    private static final Duration DEADLINE = Duration.ofSeconds(30);
    private static final Duration QUIET = Duration.ofSeconds(3);
    /**
     * Looked up by name: the probe is also built against kafka-clients 4.1 (tests/e2e/test_java_client_4_1.py),
     * which has no RENEW; this scenario runs only with 4.4.
     */
    private static final AcknowledgeType RENEW = renewType();

    private ShareRenewScenario() {}

    static void run(String bootstrap, String topic) throws Exception {
        check(RENEW != null, "this kafka-clients has no AcknowledgeType.RENEW (KIP-1222 needs 4.2 or later)");
        String group = topic + "-group";
        try (Admin admin = Admin.create(Probe.config(bootstrap))) {
            await(admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all());
            ConfigResource groupResource = new ConfigResource(ConfigResource.Type.GROUP, group);
            await(admin.incrementalAlterConfigs(Map.of(groupResource, List.of(
                    new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("share.record.lock.duration.ms", String.valueOf(LOCK.toMillis())),
                            AlterConfigOp.OpType.SET)))).all());
        }
        produce(bootstrap, topic);

        try (KafkaShareConsumer<String, String> a = consumer(bootstrap, group, "explicit", "record_limit");
                KafkaShareConsumer<String, String> b = consumer(bootstrap, group, "implicit", "batch_optimized")) {
            a.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> held = new ArrayList<>();
            Instant deadline = Instant.now().plus(DEADLINE);
            while (held.isEmpty() && Instant.now().isBefore(deadline)) {
                a.poll(POLL).forEach(held::add);
            }
            check(!held.isEmpty(), "a got nothing within %s", DEADLINE);
            line("a: record_limit with max.poll.records=%d acquired %d records, delivery counts %s", MAX_POLL_RECORDS,
                    held.size(), counts(held));
            List<String> mine = values(held);

            b.subscribe(List.of(topic));
            List<String> theirs = new ArrayList<>();
            int renewedBack = 0;
            for (int renewal = 1; renewal <= RENEWALS; renewal++) {
                Instant next = Instant.now().plus(RENEW_EVERY);
                while (Instant.now().isBefore(next)) {
                    b.poll(POLL).forEach(r -> theirs.add(r.value()));
                }
                held.forEach(r -> a.acknowledge(r, RENEW));
                a.commitSync();
                // KIP-1222: renewed records come back from the next poll, to the same consumer.
                List<ConsumerRecord<String, String>> back = new ArrayList<>();
                Instant until = Instant.now().plus(DEADLINE);
                while (back.size() < held.size() && Instant.now().isBefore(until)) {
                    ConsumerRecords<String, String> polled = a.poll(POLL);
                    polled.forEach(back::add);
                }
                check(values(back).equals(mine), "renewal %d: poll gave back %s, not %s", renewal, values(back), mine);
                check(counts(back).equals(counts(held)), "renewal %d: delivery counts %s after %s", renewal,
                        counts(back), counts(held));
                held = back;
                renewedBack++;
            }
            line("a: renewed %d times over %d s (lock %d s): poll gave the same records back each time, delivery "
                    + "counts %s", renewedBack, RENEWALS * RENEW_EVERY.toSeconds(), LOCK.toSeconds(), counts(held));
            TreeSet<String> overlap = new TreeSet<>(theirs);
            overlap.retainAll(mine);
            line("b: meanwhile got %d distinct records, %d of them a's", new TreeSet<>(theirs).size(), overlap.size());
            check(overlap.isEmpty(), "b got a's records %s", overlap);

            held.forEach(r -> a.acknowledge(r, AcknowledgeType.ACCEPT));
            a.commitSync();
            List<String> after = new ArrayList<>();
            Instant quiet = Instant.now().plus(QUIET);
            while (Instant.now().isBefore(quiet)) {
                for (ConsumerRecord<String, String> r : a.poll(POLL)) {
                    after.add(r.value());
                    a.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                b.poll(POLL).forEach(r -> after.add(r.value()));
            }
            TreeSet<String> all = new TreeSet<>(theirs);
            all.addAll(mine);
            all.addAll(after);
            line("after a accepted: %d more delivered; %d of %d records delivered in all", after.size(), all.size(),
                    RECORDS);
        }
    }

    private static AcknowledgeType renewType() {
        try {
            return AcknowledgeType.valueOf("RENEW");
        } catch (IllegalArgumentException e) {
            return null; // kafka-clients before 4.2
        }
    }

    private static List<String> values(List<ConsumerRecord<String, String>> records) {
        return records.stream().map(ConsumerRecord::value).sorted().toList();
    }

    private static List<Short> counts(List<ConsumerRecord<String, String>> records) {
        return records.stream().map(r -> r.deliveryCount().orElse((short) -1)).toList();
    }

    private static KafkaShareConsumer<String, String> consumer(String bootstrap, String group, String ackMode,
            String acquireMode) {
        Properties p = Probe.config(bootstrap);
        p.put("group.id", group);
        p.put("share.acknowledgement.mode", ackMode);
        p.put("share.acquire.mode", acquireMode);
        p.put("max.poll.records", String.valueOf(MAX_POLL_RECORDS));
        return new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    private static void produce(String bootstrap, String topic) throws Exception {
        try (KafkaProducer<String, String> producer =
                new KafkaProducer<>(Probe.config(bootstrap), new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < RECORDS; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, "n-" + i)).get();
            }
        }
    }
}
