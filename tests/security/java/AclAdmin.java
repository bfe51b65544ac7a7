// The Java AdminClient's ACL calls for tests/security/test_acl_matrix.py:
// `AclAdmin <admin bootstrap> <sasl bootstrap> <user> <password>` creates ACLs for User:dave through the
// super user's listener (one of them invalid), describes them with an exact and a MATCH filter, deletes them,
// describes again, and tries a creation as a SASL user without ALTER on the cluster. It prints one line per
// outcome (bindings sorted, exceptions by class) so that two brokers' outputs can be compared line by line.
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.CreateAclsResult;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

public class AclAdmin {
    static final String DAVE = "User:dave";

    static AclBinding acl(ResourceType type, String name, PatternType pattern, AclOperation op, AclPermissionType perm) {
        return new AclBinding(new ResourcePattern(type, name, pattern), new AccessControlEntry(DAVE, "*", op, perm));
    }

    static String show(AclBinding b) {
        return b.pattern().resourceType() + " " + b.pattern().patternType() + " " + b.pattern().name() + " "
            + b.entry().principal() + " " + b.entry().host() + " " + b.entry().operation() + " "
            + b.entry().permissionType();
    }

    static void print(String what, Collection<AclBinding> bindings) {
        List<String> lines = new ArrayList<>();
        for (AclBinding b : bindings) lines.add(show(b));
        lines.sort(null);
        System.out.println(what + " " + lines.size());
        for (String line : lines) System.out.println("  " + line);
    }

    static String outcome(KafkaFuture<?> future) throws InterruptedException {
        try {
            future.get(30, TimeUnit.SECONDS);
            return "ok";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        } catch (java.util.concurrent.TimeoutException e) {
            return "timeout";
        }
    }

    static Admin admin(Properties props) {
        props.put("request.timeout.ms", "20000");
        props.put("default.api.timeout.ms", "30000");
        return Admin.create(props);
    }

    public static void main(String[] args) throws Exception {
        Properties plain = new Properties();
        plain.put("bootstrap.servers", args[0]);
        AclBindingFilter dave = new AclBindingFilter(ResourcePatternFilter.ANY,
            new AccessControlEntryFilter(DAVE, null, AclOperation.ANY, AclPermissionType.ANY));
        try (Admin admin = admin(plain)) {
            List<AclBinding> wanted = List.of(
                acl(ResourceType.TOPIC, "java-orders", PatternType.LITERAL, AclOperation.READ, AclPermissionType.ALLOW),
                acl(ResourceType.TOPIC, "java-", PatternType.PREFIXED, AclOperation.WRITE, AclPermissionType.ALLOW),
                acl(ResourceType.GROUP, "java-group", PatternType.LITERAL, AclOperation.ALL, AclPermissionType.DENY),
                acl(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, AclOperation.DESCRIBE,
                    AclPermissionType.ALLOW),
                acl(ResourceType.CLUSTER, "not-the-cluster", PatternType.LITERAL, AclOperation.ALTER,
                    AclPermissionType.ALLOW));
            CreateAclsResult created = admin.createAcls(wanted);
            for (AclBinding b : wanted) System.out.println("create " + show(b) + " -> " + outcome(created.values().get(b)));
            // Kafka applies ACLs from its metadata log shortly after answering: wait until all four are seen
            Collection<AclBinding> seen = List.of();
            for (int i = 0; i < 100 && seen.size() < 4; i++) {
                seen = admin.describeAcls(dave).values().get(30, TimeUnit.SECONDS);
                if (seen.size() < 4) Thread.sleep(100);
            }
            print("describe principal", seen);
            print("describe match java-orders", admin.describeAcls(new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.TOPIC, "java-orders", PatternType.MATCH),
                AccessControlEntryFilter.ANY)).values().get(30, TimeUnit.SECONDS));
            print("delete topic acls", admin.deleteAcls(List.of(new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.TOPIC, null, PatternType.ANY),
                new AccessControlEntryFilter(DAVE, null, AclOperation.ANY, AclPermissionType.ANY))))
                .all().get(30, TimeUnit.SECONDS));
            print("delete the rest", admin.deleteAcls(List.of(dave)).all().get(30, TimeUnit.SECONDS));
            for (int i = 0; i < 100; i++) {
                seen = admin.describeAcls(dave).values().get(30, TimeUnit.SECONDS);
                if (seen.isEmpty()) break;
                Thread.sleep(100);
            }
            print("describe after delete", seen);
        }
        Properties sasl = new Properties();
        sasl.put("bootstrap.servers", args[1]);
        sasl.put("security.protocol", "SASL_PLAINTEXT");
        sasl.put("sasl.mechanism", "PLAIN");
        sasl.put("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required username=\""
            + args[2] + "\" password=\"" + args[3] + "\";");
        try (Admin user = admin(sasl)) {
            AclBinding b = acl(ResourceType.TOPIC, "java-x", PatternType.LITERAL, AclOperation.READ, AclPermissionType.ALLOW);
            System.out.println("create as " + args[2] + " -> " + outcome(user.createAcls(List.of(b)).all()));
            System.out.println("describe as " + args[2] + " -> " + outcome(user.describeAcls(dave).values()));
        }
    }
}
