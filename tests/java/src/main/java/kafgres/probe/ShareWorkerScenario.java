package kafgres.probe;

import static kafgres.probe.Probe.await;
import static kafgres.probe.Probe.check;
import static kafgres.probe.Probe.line;

import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * {@code share-worker}: one KafkaShareConsumer of the share group NAME-group on the existing topic NAME,
 * in implicit acknowledgement mode, next to other members (tests/e2e/test_sql_share_consume.py puts a SQL
 * session, {@code kafgres.share_consume}, in the same group). It sets the group's share.auto.offset.reset
 * to earliest, joins, prints "joined" once the group has assigned it a partition, then prints "got VALUE"
 * for each record delivered to it (accepting them with commitSync) until none came for IDLE after the
 * first one (or DEADLINE passed), and "done" after it closed.
 */
final class ShareWorkerScenario {
    private static final Duration POLL = Duration.ofMillis(200);
    private static final Duration IDLE = Duration.ofSeconds(4);
    private static final Duration DEADLINE = Duration.ofSeconds(60);
    private static final String CLIENT_ID = "share-worker";

    private ShareWorkerScenario() {}

    static void run(String bootstrap, String topic) throws Exception {
        String group = topic + "-group";
        Properties p = Probe.config(bootstrap);
        p.put("group.id", group);
        p.put("client.id", CLIENT_ID);
        try (Admin admin = Admin.create(Probe.config(bootstrap));
                KafkaShareConsumer<String, String> c =
                        new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            await(admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, group),
                    List.of(new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                            AlterConfigOp.OpType.SET)))).all());
            c.subscribe(List.of(topic));
            Instant deadline = Instant.now().plus(DEADLINE);
            boolean assigned = false;
            while (!assigned && Instant.now().isBefore(deadline)) {
                check(c.poll(POLL).isEmpty(), "records came before anything was produced");
                ShareGroupDescription d = await(admin.describeShareGroups(List.of(group)).describedGroups().get(group));
                assigned = d.members().stream().anyMatch(
                        m -> m.clientId().equals(CLIENT_ID) && !m.assignment().topicPartitions().isEmpty());
            }
            check(assigned, "never assigned a partition of %s", topic);
            line("joined");
            System.out.flush();
            Instant last = null;
            while (Instant.now().isBefore(deadline) && (last == null || Instant.now().isBefore(last.plus(IDLE)))) {
                for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                    line("got %s", r.value());
                    last = Instant.now();
                }
                c.commitSync();
                System.out.flush();
            }
        }
        line("done");
    }
}
