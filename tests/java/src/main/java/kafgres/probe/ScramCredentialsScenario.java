package kafgres.probe;

import static kafgres.probe.Probe.await;
import static kafgres.probe.Probe.line;
import static kafgres.probe.Probe.outcome;

import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;

/**
 * User SCRAM credentials with the Java Admin client (KIP-554), authenticated as a superuser (the
 * KAFGRES_PROBE_CONFIG file): NAME, an existing role without a password, gets a SCRAM-SHA-256
 * credential the client salts itself, describes it, logs in with it, is refused a SCRAM-SHA-512 one,
 * then loses it and can no longer log in.
 */
final class ScramCredentialsScenario {
    private static final String PASSWORD = "java-secret";

    private ScramCredentialsScenario() {}

    static void run(String bootstrap, String name) throws Exception {
        try (Admin admin = Admin.create(Probe.config(bootstrap))) {
            line("upsert SCRAM-SHA-256: %s", outcome(admin.alterUserScramCredentials(List.of(
                    new UserScramCredentialUpsertion(name, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                            PASSWORD))).all()));
            UserScramCredentialsDescription described =
                    await(admin.describeUserScramCredentials(List.of(name)).description(name));
            for (ScramCredentialInfo info : described.credentialInfos()) {
                line("described: %s %d", info.mechanism(), info.iterations());
            }
            line("login with it: %s", login(bootstrap, name, PASSWORD));
            line("upsert SCRAM-SHA-512: %s", outcome(admin.alterUserScramCredentials(List.of(
                    new UserScramCredentialUpsertion(name, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                            PASSWORD))).all()));
            line("delete SCRAM-SHA-256: %s", outcome(admin.alterUserScramCredentials(List.of(
                    new UserScramCredentialDeletion(name, ScramMechanism.SCRAM_SHA_256))).all()));
            line("login after the deletion: %s", login(bootstrap, name, PASSWORD));
            line("describe after the deletion: %s",
                    outcome(admin.describeUserScramCredentials(List.of(name)).description(name)));
        }
    }

    /** "ok" when NAME logs in with PASSWORD over SCRAM-SHA-256, else the exception's class. */
    private static String login(String bootstrap, String name, String password) throws Exception {
        Properties props = Probe.config(bootstrap);
        props.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + name + "\" password=\"" + password + "\";");
        try (Admin user = Admin.create(props)) {
            return outcome(user.listTopics().names());
        }
    }
}
