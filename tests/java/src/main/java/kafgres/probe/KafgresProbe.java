package kafgres.probe;

import java.util.Map;

/**
 * Runs one scenario of the Java client against a Kafka-compatible broker and prints what it saw.
 *
 * <pre>
 *   java -cp kafgres-probe.jar:$(cat classpath.txt) kafgres.probe.KafgresProbe SCENARIO BOOTSTRAP NAME
 * </pre>
 *
 * NAME names everything the scenario creates: the topic is NAME, the consumer group NAME-group, so
 * the caller can inspect them afterwards with the command-line tools. Each scenario prints exact,
 * line-oriented results on stdout (no timestamps, ids or other varying values: where a value
 * varies, a line says what was checked about it), so tests/e2e/test_java_client.py compares whole
 * lines. Client logs go to stderr.
 *
 * Exit status: 0 when the scenario ran to its end, 1 on a failed check or any unexpected exception
 * (the cause is printed on stderr), 2 on bad arguments. Every wait in a scenario has a deadline.
 */
public final class KafgresProbe {
    /** A scenario, given the bootstrap address and the name of what it creates. */
    interface Scenario {
        void run(String bootstrap, String name) throws Exception;
    }

    private static final Map<String, Scenario> SCENARIOS = Map.ofEntries(
            Map.entry("admin", AdminScenario::run),
            Map.entry("produce-consume", (bootstrap, name) -> ProduceConsumeScenario.run(bootstrap, name, true)),
            Map.entry("produce-consume-plain", (bootstrap, name) -> ProduceConsumeScenario.run(bootstrap, name, false)),
            Map.entry("group-resume", GroupResumeScenario::run),
            Map.entry("compression", CompressionScenario::run),
            Map.entry("cooperative", CooperativeScenario::run),
            Map.entry("consumer-protocol", ConsumerProtocolScenario::run),
            Map.entry("share-group", ShareGroupScenario::run),
            Map.entry("share-admin-consume", ShareAdminScenario::consume),
            Map.entry("share-admin-member", ShareAdminScenario::member),
            Map.entry("share-admin-reset", ShareAdminScenario::reset),
            Map.entry("share-admin-reread", ShareAdminScenario::reread),
            Map.entry("share-worker", ShareWorkerScenario::run),
            Map.entry("share-renew", ShareRenewScenario::run),
            Map.entry("transactions", TransactionsScenario::run),
            Map.entry("quotas", QuotasScenario::run),
            Map.entry("scram-credentials", ScramCredentialsScenario::run),
            Map.entry("secure-client", SecureClientScenario::run),
            Map.entry("failover", FailoverScenario::run));

    private KafgresProbe() {}

    public static void main(String[] args) {
        if (args.length != 3 || !SCENARIOS.containsKey(args[0])) {
            System.err.println("usage: KafgresProbe SCENARIO BOOTSTRAP NAME");
            System.err.println("scenarios: " + String.join(", ", SCENARIOS.keySet().stream().sorted().toList()));
            System.exit(2);
        }
        int status = 0;
        try {
            SCENARIOS.get(args[0]).run(args[1], args[2]);
        } catch (Throwable e) {
            System.out.flush();
            System.err.println("kafgres-probe: scenario " + args[0] + " failed: " + e);
            e.printStackTrace(System.err);
            status = 1;
        }
        System.out.flush();
        // Client threads must not keep a failed run alive.
        System.exit(status);
    }
}
