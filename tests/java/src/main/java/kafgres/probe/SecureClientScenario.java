package kafgres.probe;

import static kafgres.probe.Probe.CALL_TIMEOUT;
import static kafgres.probe.Probe.line;

import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * One client with the security settings of the KAFGRES_PROBE_CONFIG file (TLS trust and key
 * material, SASL) against a secured listener, for tests/e2e/test_tls_clients.py. NAME is an
 * existing one-partition topic, written to and read by nobody else. Prints:
 *
 * <pre>
 *   connect: ok | REFUSAL        an Admin's Metadata request (listTopics, which needs no ACL)
 *   produce: ok | REFUSAL        one record, value "java NAME", with the default (idempotent) producer
 *   consume: VALUE | REFUSAL     the first record of partition 0, read with assign() (no group)
 * </pre>
 *
 * REFUSAL is the simple class name of the exception the client reported, then the class and
 * message of its innermost cause in parentheses when that is another exception (the TLS alert or
 * certificate check behind an SslAuthenticationException). After a refused connect nothing else is
 * tried; after a refused produce the consume still runs (an ACL may allow one and not the other).
 * A record that does not arrive within CALL_TIMEOUT fails the scenario.
 */
final class SecureClientScenario {
    private static final Duration POLL = Duration.ofMillis(200);

    private SecureClientScenario() {}

    static void run(String bootstrap, String topic) throws Exception {
        String connected;
        try (Admin admin = Admin.create(Probe.config(bootstrap))) {
            connected = outcome(() -> admin.listTopics().names().get(CALL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS));
        }
        line("connect: %s", connected);
        if (!connected.equals("ok")) {
            return;
        }
        line("produce: %s", outcome(() -> produce(bootstrap, topic)));
        line("consume: %s", consume(bootstrap, topic));
    }

    /** What a client call throws, as the caller's output shows it. */
    interface Call {
        Object call() throws Exception;
    }

    private static String outcome(Call call) throws Exception {
        try {
            call.call();
            return "ok";
        } catch (java.util.concurrent.TimeoutException e) {
            throw new Probe.CheckFailed("no answer within " + CALL_TIMEOUT.toSeconds() + " s");
        } catch (ExecutionException e) {
            return refusal(e.getCause());
        } catch (org.apache.kafka.common.KafkaException e) {
            return refusal(e);
        }
    }

    static String refusal(Throwable e) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        String name = e.getClass().getSimpleName();
        return root == e ? name : name + " (" + root.getClass().getSimpleName() + ": " + root.getMessage() + ")";
    }

    private static RecordMetadata produce(String bootstrap, String topic) throws Exception {
        Properties props = Probe.config(bootstrap);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("max.block.ms", String.valueOf(CALL_TIMEOUT.toMillis()));
        props.put("delivery.timeout.ms", String.valueOf(CALL_TIMEOUT.toMillis()));
        props.put("request.timeout.ms", String.valueOf(CALL_TIMEOUT.toMillis() / 2));
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            RecordMetadata sent = producer.send(new ProducerRecord<>(topic, 0, null, "java " + topic))
                    .get(CALL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            Probe.checkEqual("offset of the one record", 0L, sent.offset());
            return sent;
        }
    }

    private static String consume(String bootstrap, String topic) throws Exception {
        Properties props = Probe.config(bootstrap);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.put("enable.auto.commit", "false");
        TopicPartition partition = new TopicPartition(topic, 0);
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long deadline = System.nanoTime() + CALL_TIMEOUT.toNanos();
            while (System.nanoTime() < deadline) {
                try {
                    for (ConsumerRecord<String, String> record : consumer.poll(POLL)) {
                        return record.value();
                    }
                } catch (org.apache.kafka.common.KafkaException e) {
                    return refusal(e);
                }
            }
        }
        throw new Probe.CheckFailed("no record of " + topic + " within " + CALL_TIMEOUT.toSeconds() + " s");
    }
}
