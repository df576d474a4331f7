package kafgres.probe;

import static kafgres.probe.Probe.CALL_TIMEOUT;
import static kafgres.probe.Probe.await;
import static kafgres.probe.Probe.check;
import static kafgres.probe.Probe.checkEqual;
import static kafgres.probe.Probe.line;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A KafkaProducer sends RECORDS keyed records with headers to a new PARTITIONS-partition topic;
 * a KafkaConsumer in a fresh classic group reads them all back through subscribe(), checks every
 * field against what the producer was told, commits synchronously and reads the commit back.
 *
 * With `idempotent` the producer has the default configuration (acks=all and, since Kafka 3.0,
 * enable.idempotence=true, so it needs InitProducerId); without, enable.idempotence=false and
 * nothing else changes. Which partition a key lands on is the client's murmur2 choice, so the
 * per-partition counts printed are fixed by the keys.
 */
final class ProduceConsumeScenario {
    static final int PARTITIONS = 3;
    static final int RECORDS = 100;
    private static final Duration PRODUCE_TIMEOUT = Duration.ofSeconds(30);
    private static final Duration CONSUME_TIMEOUT = Duration.ofSeconds(60);
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(10);

    private ProduceConsumeScenario() {}

    static void run(String bootstrap, String topic, boolean idempotent) throws Exception {
        try (Admin admin = Admin.create(Probe.config(bootstrap))) {
            await(admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all());
        }
        long timestampBase = System.currentTimeMillis() - 60_000;
        List<RecordMetadata> sent = produce(bootstrap, topic, idempotent, timestampBase);
        consume(bootstrap, topic, topic + "-group", sent, timestampBase);
    }

    private static List<RecordMetadata> produce(String bootstrap, String topic, boolean idempotent, long timestampBase)
            throws Exception {
        Properties props = Probe.config(bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        if (!idempotent) {
            props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        }
        ProducerConfig effective = new ProducerConfig(props);
        line("producer: acks=%s enable.idempotence=%b", effective.getString(ProducerConfig.ACKS_CONFIG),
                effective.getBoolean(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG));

        List<RecordMetadata> sent = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (int i = 0; i < RECORDS; i++) {
                futures.add(producer.send(new ProducerRecord<>(
                        topic, null, timestampBase + i, key(i), value(i), headers(i))));
            }
            long deadline = System.nanoTime() + PRODUCE_TIMEOUT.toNanos();
            for (int i = 0; i < RECORDS; i++) {
                long remaining = Math.max(0, deadline - System.nanoTime());
                try {
                    sent.add(futures.get(i).get(remaining, TimeUnit.NANOSECONDS));
                } catch (TimeoutException e) {
                    throw new Probe.CheckFailed("record " + i + " not acknowledged within "
                            + PRODUCE_TIMEOUT.toSeconds() + " s");
                } catch (ExecutionException e) {
                    throw new Probe.CheckFailed("record " + i + " failed: " + e.getCause());
                }
            }
            producer.flush();
            producer.close(CLOSE_TIMEOUT);
        }
        line("produced: %d records acknowledged", sent.size());
        Map<Integer, List<Long>> offsets = new TreeMap<>();
        for (int p = 0; p < PARTITIONS; p++) {
            offsets.put(p, new ArrayList<>());
        }
        for (RecordMetadata m : sent) {
            checkEqual("topic of an acknowledged record", topic, m.topic());
            offsets.computeIfAbsent(m.partition(), p -> new ArrayList<>()).add(m.offset());
        }
        offsets.forEach((p, list) -> line("produced: partition=%d records=%d offsets=%s", p, list.size(), span(list)));
        return sent;
    }

    private static void consume(String bootstrap, String topic, String group, List<RecordMetadata> sent,
            long timestampBase) throws Exception {
        Properties props = Probe.config(bootstrap);
        props.put("group.id", group);
        props.put("group.protocol", "classic");
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());

        ConsumerRecord<String, String>[] byIndex = newRecordArray();
        int duplicates = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.nanoTime() + CONSUME_TIMEOUT.toNanos();
            int received = 0;
            while (received < RECORDS && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    int i = indexOf(r.key());
                    if (byIndex[i] != null) {
                        duplicates++;
                    } else {
                        byIndex[i] = r;
                        received++;
                    }
                }
            }
            check(received == RECORDS, "consumed %d of %d records within %d s", received, RECORDS,
                    CONSUME_TIMEOUT.toSeconds());
            line("consumed: %d records, %d duplicates", received, duplicates);

            Map<Integer, List<Long>> offsets = new TreeMap<>();
            for (int p = 0; p < PARTITIONS; p++) {
                offsets.put(p, new ArrayList<>());
            }
            for (ConsumerRecord<String, String> r : byIndex) {
                offsets.computeIfAbsent(r.partition(), p -> new ArrayList<>()).add(r.offset());
            }
            offsets.forEach((p, list) -> line("consumed: partition=%d records=%d offsets=%s", p, list.size(),
                    span(list.stream().sorted().toList())));

            for (int i = 0; i < RECORDS; i++) {
                verify(i, byIndex[i], sent.get(i), topic, timestampBase + i);
            }
            line("verified: keys, values, headers, timestamps, partitions and offsets of %d records", RECORDS);

            consumer.commitSync(CALL_TIMEOUT);
            Set<TopicPartition> assignment = consumer.assignment();
            checkEqual("partitions assigned to the only member", PARTITIONS, assignment.size());
            Map<TopicPartition, OffsetAndMetadata> committed = new TreeMap<>(
                    (a, b) -> Integer.compare(a.partition(), b.partition()));
            committed.putAll(consumer.committed(assignment, CALL_TIMEOUT));
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : committed.entrySet()) {
                line("committed: partition=%d offset=%s", e.getKey().partition(),
                        e.getValue() == null ? "none" : Long.toString(e.getValue().offset()));
            }
            consumer.close(CloseOptions.timeout(CLOSE_TIMEOUT));
        }
    }

    private static void verify(int i, ConsumerRecord<String, String> r, RecordMetadata m, String topic,
            long timestamp) {
        String what = "record " + i + " ";
        checkEqual(what + "topic", topic, r.topic());
        checkEqual(what + "key", key(i), r.key());
        checkEqual(what + "value", value(i), r.value());
        checkEqual(what + "partition (as acknowledged)", m.partition(), r.partition());
        checkEqual(what + "offset (as acknowledged)", m.offset(), r.offset());
        checkEqual(what + "timestamp type", TimestampType.CREATE_TIME, r.timestampType());
        checkEqual(what + "timestamp", timestamp, r.timestamp());
        checkEqual(what + "acknowledged timestamp", timestamp, m.timestamp());
        Header[] got = r.headers().toArray();
        Header[] want = headers(i).toArray();
        checkEqual(what + "header count", want.length, got.length);
        for (int h = 0; h < want.length; h++) {
            checkEqual(what + "header " + h + " key", want[h].key(), got[h].key());
            checkEqual(what + "header " + h + " value", text(want[h].value()), text(got[h].value()));
        }
    }

    static String key(int i) {
        return String.format("key-%03d", i);
    }

    static String value(int i) {
        return String.format("value-%03d", i);
    }

    /** Three headers: the index, a fixed tag, and one with a null value (encoded as length -1). */
    static RecordHeaders headers(int i) {
        RecordHeaders headers = new RecordHeaders();
        headers.add("index", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
        headers.add("probe", "kafgres".getBytes(StandardCharsets.UTF_8));
        headers.add("nothing", null);
        return headers;
    }

    private static int indexOf(String key) {
        check(key != null && key.matches("key-\\d{3}"), "unexpected key %s", key);
        int i = Integer.parseInt(key.substring(4));
        check(i < RECORDS, "unexpected key %s", key);
        return i;
    }

    private static String text(byte[] bytes) {
        return bytes == null ? "<null>" : new String(bytes, StandardCharsets.UTF_8);
    }

    /** "first..last" of offsets in order, "none" when empty; fails unless they are consecutive. */
    static String span(List<Long> offsets) {
        if (offsets.isEmpty()) {
            return "none";
        }
        for (int k = 1; k < offsets.size(); k++) {
            check(offsets.get(k) == offsets.get(k - 1) + 1, "offsets not consecutive: %s", offsets);
        }
        return offsets.get(0) + ".." + offsets.get(offsets.size() - 1);
    }

    @SuppressWarnings("unchecked")
    private static ConsumerRecord<String, String>[] newRecordArray() {
        return (ConsumerRecord<String, String>[]) new ConsumerRecord<?, ?>[RECORDS];
    }
}
