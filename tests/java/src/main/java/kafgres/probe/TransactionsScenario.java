package kafgres.probe;

import static kafgres.probe.Probe.await;
import static kafgres.probe.Probe.check;
import static kafgres.probe.Probe.line;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Exactly-once consume-transform-produce with the Java client's transactions: records of NAME-in
 * are read by group NAME-group (read_committed), transformed and written to NAME-out in a
 * transaction that also commits the group's offsets (sendOffsetsToTransaction). One transaction is
 * aborted on purpose. A read_committed reader of NAME-out then sees every input record exactly
 * once and nothing of the aborted one; a read_uncommitted reader sees the aborted records too. A
 * second producer with the same transactional.id fences the first.
 */
final class TransactionsScenario {
    private static final int PARTITIONS = 2;
    private static final int RECORDS = 20;
    private static final int POISON = 5;
    private static final Duration POLL = Duration.ofMillis(200);
    private static final Duration DEADLINE = Duration.ofSeconds(60);

    private TransactionsScenario() {}

    static void run(String bootstrap, String name) throws Exception {
        String in = name + "-in";
        String out = name + "-out";
        String group = name + "-group";
        try (Admin admin = Admin.create(Probe.config(bootstrap))) {
            await(admin.createTopics(List.of(new NewTopic(in, PARTITIONS, (short) 1),
                    new NewTopic(out, PARTITIONS, (short) 1))).all());
            produceInput(bootstrap, in);
            line("input: %d records", RECORDS);

            try (KafkaProducer<String, String> producer = transactional(bootstrap, name + "-tx");
                    KafkaConsumer<String, String> consumer = consumer(bootstrap, group, "read_committed")) {
                producer.initTransactions();
                consumer.subscribe(List.of(in));

                producer.beginTransaction();
                for (int i = 0; i < POISON; i++) {
                    producer.send(new ProducerRecord<>(out, i % PARTITIONS, null, "poison-" + i));
                }
                producer.flush();
                producer.abortTransaction();
                line("aborted a transaction of %d records", POISON);

                int processed = 0;
                int transactions = 0;
                long deadline = System.nanoTime() + DEADLINE.toNanos();
                while (processed < RECORDS) {
                    check(System.nanoTime() < deadline, "only %d of %d records processed", processed, RECORDS);
                    ConsumerRecords<String, String> records = consumer.poll(POLL);
                    if (records.isEmpty()) {
                        continue;
                    }
                    producer.beginTransaction();
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (ConsumerRecord<String, String> r : records) {
                        producer.send(new ProducerRecord<>(out, r.partition(), r.key(), r.value().toUpperCase()));
                        offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                        processed++;
                    }
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                    producer.commitTransaction();
                    transactions++;
                }
                check(transactions > 0, "no transaction committed");
                line("processed %d records, each poll's output and offsets in one committed transaction", processed);

                try (KafkaProducer<String, String> zombieKiller = transactional(bootstrap, name + "-tx")) {
                    zombieKiller.initTransactions();
                    String outcome;
                    try {
                        producer.beginTransaction();
                        producer.send(new ProducerRecord<>(out, 0, null, "zombie")).get();
                        producer.commitTransaction();
                        outcome = "committed (wrong)";
                    } catch (ProducerFencedException e) {
                        outcome = "ProducerFencedException";
                    } catch (java.util.concurrent.ExecutionException | KafkaException e) {
                        Throwable cause = e.getCause() != null ? e.getCause() : e;
                        outcome = cause.getClass().getSimpleName();
                    }
                    line("the old producer after a new one with its id: %s", outcome);
                }
            }

            List<String> committed = readAll(bootstrap, out, "read_committed");
            List<String> uncommitted = readAll(bootstrap, out, "read_uncommitted");
            long poison = committed.stream().filter(v -> v.startsWith("poison")).count();
            long distinct = committed.stream().distinct().count();
            line("read_committed: %d records, %d distinct, %d poison, %d zombie", committed.size(), distinct, poison,
                    committed.stream().filter(v -> v.equals("zombie")).count());
            line("read_uncommitted: %d poison", uncommitted.stream().filter(v -> v.startsWith("poison")).count());

            Map<TopicPartition, OffsetAndMetadata> groupOffsets =
                    await(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
            long total = groupOffsets.values().stream().mapToLong(OffsetAndMetadata::offset).sum();
            line("group offsets on the input: %d in total", total);
        }
    }

    private static void produceInput(String bootstrap, String topic) throws Exception {
        Properties props = Probe.config(bootstrap);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < RECORDS; i++) {
                producer.send(new ProducerRecord<>(topic, i % PARTITIONS, "k" + i, "record-" + i));
            }
            producer.flush();
        }
    }

    private static List<String> readAll(String bootstrap, String topic, String isolation) {
        try (KafkaConsumer<String, String> consumer = consumer(bootstrap, null, isolation)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) {
                partitions.add(new TopicPartition(topic, p));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
            List<String> values = new ArrayList<>();
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (true) {
                boolean done = true;
                for (TopicPartition tp : partitions) {
                    done &= consumer.position(tp) >= ends.get(tp);
                }
                if (done) {
                    return values;
                }
                check(System.nanoTime() < deadline, "reading %s (%s) did not reach %s", topic, isolation, ends);
                consumer.poll(POLL).forEach(r -> values.add(r.value()));
            }
        }
    }

    private static KafkaProducer<String, String> transactional(String bootstrap, String transactionalId) {
        Properties props = Probe.config(bootstrap);
        props.put("transactional.id", transactionalId);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        return new KafkaProducer<>(props);
    }

    private static KafkaConsumer<String, String> consumer(String bootstrap, String group, String isolation) {
        Properties props = Probe.config(bootstrap);
        if (group != null) {
            props.put("group.id", group);
        }
        props.put("isolation.level", isolation);
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        return new KafkaConsumer<>(props);
    }
}
