package kafgres.probe;

import static kafgres.probe.Probe.await;
import static kafgres.probe.Probe.line;
import static kafgres.probe.Probe.outcome;

import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Client quotas with the Java Admin client (KIP-546: alterClientQuotas, describeClientQuotas), and
 * a producer held to a producer_byte_rate (and a request_percentage it stays under): the broker's
 * throttle time reaches the producer's own produce-throttle-time-max metric. A key Kafgres does not
 * enforce is refused, not stored.
 */
final class QuotasScenario {
    /** Bytes per second; the producer sends 8 x 100 kB, 80 kB/s over the 10 s window. */
    private static final double RATE = 50_000;

    private QuotasScenario() {}

    static void run(String bootstrap, String name) throws Exception {
        String clientId = name + "-producer";
        ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, clientId));
        ClientQuotaFilter filter = ClientQuotaFilter.containsOnly(
                List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.CLIENT_ID, clientId)));
        try (Admin admin = Admin.create(Probe.config(bootstrap))) {
            await(admin.createTopics(List.of(new NewTopic(name, 1, (short) 1))).all());
            line("alter-client-quotas producer_byte_rate: %s", outcome(admin.alterClientQuotas(List.of(
                    new ClientQuotaAlteration(entity, List.of(new ClientQuotaAlteration.Op("producer_byte_rate", RATE)))))
                    .all()));
            line("alter-client-quotas request_percentage: %s", outcome(admin.alterClientQuotas(List.of(
                    new ClientQuotaAlteration(entity, List.of(new ClientQuotaAlteration.Op("request_percentage", 50.0)))))
                    .all()));
            line("alter-client-quotas controller_mutation_rate: %s", outcome(admin.alterClientQuotas(List.of(
                    new ClientQuotaAlteration(entity,
                            List.of(new ClientQuotaAlteration.Op("controller_mutation_rate", 10.0)))))
                    .all()));
            line("describe-client-quotas: %s",
                    new java.util.TreeMap<>(await(admin.describeClientQuotas(filter).entities()).get(entity)));

            Properties props = Probe.config(bootstrap);
            props.put("client.id", clientId);
            props.put("acks", "all");
            props.put("linger.ms", "0");
            props.put("key.serializer", ByteArraySerializer.class.getName());
            props.put("value.serializer", ByteArraySerializer.class.getName());
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
                byte[] value = new byte[100_000];
                for (int i = 0; i < 8; i++) {
                    producer.send(new ProducerRecord<>(name, value)).get(60, TimeUnit.SECONDS);
                }
                line("producer: sent=8 throttled=%b", throttleMax(producer.metrics()) > 0);
            }

            await(admin.alterClientQuotas(List.of(
                    new ClientQuotaAlteration(entity, List.of(new ClientQuotaAlteration.Op("producer_byte_rate", null),
                            new ClientQuotaAlteration.Op("request_percentage", null)))))
                    .all());
            line("describe-client-quotas after removal: %s", await(admin.describeClientQuotas(filter).entities()));
        }
    }

    private static double throttleMax(Map<MetricName, ? extends Metric> metrics) {
        return metrics.entrySet().stream()
                .filter(e -> e.getKey().name().equals("produce-throttle-time-max")
                        && e.getKey().group().equals("producer-metrics"))
                .mapToDouble(e -> ((Number) e.getValue().metricValue()).doubleValue())
                .filter(v -> !Double.isNaN(v))
                .max()
                .orElse(0);
    }
}
