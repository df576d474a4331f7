package kafgres.probe;

import static kafgres.probe.Probe.CALL_TIMEOUT;
import static kafgres.probe.Probe.await;
import static kafgres.probe.Probe.check;
import static kafgres.probe.Probe.checkEqual;
import static kafgres.probe.Probe.line;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Every compression codec of the Java producer: RECORDS records per codec, in as few batches as
 * linger.ms allows, to one partition of topic NAME (partition i for the i-th codec), then read back
 * by one consumer with assign() from the beginning, and compared. The broker keeps the producer's compressed batches as they
 * are, so this checks that it accepts each codec and serves the batches whole.
 */
final class CompressionScenario {
    private static final List<String> CODECS = List.of("none", "gzip", "snappy", "lz4", "zstd");
    private static final int RECORDS = 50;
    private static final Duration CONSUME_TIMEOUT = Duration.ofSeconds(30);

    private CompressionScenario() {}

    static void run(String bootstrap, String topic) throws Exception {
        try (Admin admin = Admin.create(Probe.config(bootstrap))) {
            await(admin.createTopics(List.of(new NewTopic(topic, CODECS.size(), (short) 1))).all());
        }
        for (int p = 0; p < CODECS.size(); p++) {
            produce(bootstrap, topic, p, CODECS.get(p));
        }
        Map<Integer, List<ConsumerRecord<String, String>>> byPartition = consume(bootstrap, topic);
        for (int p = 0; p < CODECS.size(); p++) {
            String codec = CODECS.get(p);
            List<ConsumerRecord<String, String>> records = byPartition.getOrDefault(p, List.of());
            checkEqual(codec + " records consumed", RECORDS, records.size());
            for (int i = 0; i < RECORDS; i++) {
                ConsumerRecord<String, String> r = records.get(i);
                checkEqual(codec + " record " + i + " offset", (long) i, r.offset());
                checkEqual(codec + " record " + i + " key", "key-" + i, r.key());
                checkEqual(codec + " record " + i + " value", value(codec, i), r.value());
            }
            line("compression.type=%s: produced %d, consumed %d, verified", codec, RECORDS, records.size());
        }
    }

    /** A compressible value, long enough for every codec to shrink the batch. */
    private static String value(String codec, int i) {
        return codec + " record " + i + " " + "abcdefghij".repeat(20);
    }

    private static void produce(String bootstrap, String topic, int partition, String codec) throws Exception {
        Properties props = Probe.config(bootstrap);
        props.put("compression.type", codec);
        props.put("enable.idempotence", "false");
        props.put("linger.ms", "50");
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < RECORDS; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, partition, "key-" + i, value(codec, i))));
            }
            long deadline = System.nanoTime() + CALL_TIMEOUT.toNanos();
            for (int i = 0; i < RECORDS; i++) {
                long remaining = Math.max(0, deadline - System.nanoTime());
                checkEqual(codec + " offset of record " + i, (long) i,
                        sent.get(i).get(remaining, TimeUnit.NANOSECONDS).offset());
            }
        }
    }

    /** Every record of every partition from offset 0, by partition (bounded by CONSUME_TIMEOUT). */
    private static Map<Integer, List<ConsumerRecord<String, String>>> consume(String bootstrap, String topic) {
        Properties props = Probe.config(bootstrap);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.put("auto.offset.reset", "earliest");
        Map<Integer, List<ConsumerRecord<String, String>>> byPartition = new TreeMap<>();
        int total = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (int p = 0; p < CODECS.size(); p++) {
                partitions.add(new TopicPartition(topic, p));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            long deadline = System.nanoTime() + CONSUME_TIMEOUT.toNanos();
            while (total < RECORDS * CODECS.size() && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    byPartition.computeIfAbsent(r.partition(), p -> new ArrayList<>()).add(r);
                    total++;
                }
            }
        }
        check(total == RECORDS * CODECS.size(), "consumed %d of %d records within %d s", total,
                RECORDS * CODECS.size(), CONSUME_TIMEOUT.toSeconds());
        return byPartition;
    }
}
