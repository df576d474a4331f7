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
import java.util.Set;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A classic consumer group resumes where it committed: a first member reads RECORDS records of a
 * one-partition topic, commits offset COMMIT_AT (with metadata) after the first COMMIT_AT, and
 * closes (LeaveGroup); a new member of the same group sees that commit and fetches from it.
 *
 * The records are produced with enable.idempotence=false: this scenario is about groups, and
 * must not depend on InitProducerId (produce-consume covers the default producer).
 */
final class GroupResumeScenario {
    private static final int RECORDS = 10;
    private static final int COMMIT_AT = 5;
    private static final String COMMIT_METADATA = "resume-here";
    private static final Duration CONSUME_TIMEOUT = Duration.ofSeconds(60);
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(10);

    private GroupResumeScenario() {}

    static void run(String bootstrap, String topic) throws Exception {
        String group = topic + "-group";
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = Admin.create(Probe.config(bootstrap))) {
            await(admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all());
        }
        produce(bootstrap, topic);
        line("produced: %d records", RECORDS);

        try (KafkaConsumer<String, String> first = consumer(bootstrap, group)) {
            first.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> records = poll(first, COMMIT_AT);
            List<ConsumerRecord<String, String>> handled = records.subList(0, COMMIT_AT);
            line("first member: read offsets %s", offsets(handled));
            first.commitSync(Map.of(tp, new OffsetAndMetadata(COMMIT_AT, COMMIT_METADATA)), CALL_TIMEOUT);
            OffsetAndMetadata committed = first.committed(Set.of(tp), CALL_TIMEOUT).get(tp);
            line("first member: committed %s", describe(committed));
            first.close(CloseOptions.timeout(CLOSE_TIMEOUT));
        }
        line("first member: closed");

        try (KafkaConsumer<String, String> second = consumer(bootstrap, group)) {
            line("second member: sees committed %s", describe(second.committed(Set.of(tp), CALL_TIMEOUT).get(tp)));
            second.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> records = poll(second, RECORDS - COMMIT_AT);
            line("second member: read offsets %s values %s..%s", offsets(records),
                    records.get(0).value(), records.get(records.size() - 1).value());
            second.close(CloseOptions.timeout(CLOSE_TIMEOUT));
        }
    }

    private static void produce(String bootstrap, String topic) throws Exception {
        Properties props = Probe.config(bootstrap);
        props.put("enable.idempotence", "false");
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < RECORDS; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, 0, null, "value-" + i)));
            }
            long deadline = System.nanoTime() + CALL_TIMEOUT.toNanos();
            for (int i = 0; i < RECORDS; i++) {
                long remaining = Math.max(0, deadline - System.nanoTime());
                checkEqual("offset of record " + i, (long) i,
                        sent.get(i).get(remaining, TimeUnit.NANOSECONDS).offset());
            }
        }
    }

    private static KafkaConsumer<String, String> consumer(String bootstrap, String group) {
        Properties props = Probe.config(bootstrap);
        props.put("group.id", group);
        props.put("group.protocol", "classic");
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        return new KafkaConsumer<>(props);
    }

    /** Polls until at least `count` records arrived (bounded by CONSUME_TIMEOUT). */
    private static List<ConsumerRecord<String, String>> poll(KafkaConsumer<String, String> consumer, int count) {
        List<ConsumerRecord<String, String>> records = new ArrayList<>();
        long deadline = System.nanoTime() + CONSUME_TIMEOUT.toNanos();
        while (records.size() < count && System.nanoTime() < deadline) {
            consumer.poll(Duration.ofMillis(500)).forEach(records::add);
        }
        check(records.size() >= count, "consumed %d of %d records within %d s", records.size(), count,
                CONSUME_TIMEOUT.toSeconds());
        return records;
    }

    private static String offsets(List<ConsumerRecord<String, String>> records) {
        List<Long> offsets = records.stream().map(ConsumerRecord::offset).toList();
        for (ConsumerRecord<String, String> r : records) {
            checkEqual("value at offset " + r.offset(), "value-" + r.offset(), r.value());
        }
        return ProduceConsumeScenario.span(offsets);
    }

    private static String describe(OffsetAndMetadata committed) {
        return committed == null ? "nothing"
                : "offset=" + committed.offset() + " metadata=" + committed.metadata();
    }
}
