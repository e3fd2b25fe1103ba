// Creates Kafka ACLs through the Admin API of the kafka-clients jar the local broker runs on.
// aiokafka has no ACL API, and kafka-tools' AclCommand is not among the broker's jars, so
// devtools/local_broker.py runs this file with Java's single-file source launcher:
//
//   java -cp 'LIBS/*' KafkaAcls.java BOOTSTRAP USER PASSWORD < acls
//
// Each line of stdin: PRINCIPAL RESOURCE_TYPE PATTERN_TYPE NAME OPERATION [DENY]
// e.g. "User:tenant-a TOPIC PREFIXED quotaflow.tenant.team-a WRITE".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

public class KafkaAcls {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("security.protocol", "SASL_PLAINTEXT");
        props.put("sasl.mechanism", "SCRAM-SHA-512");
        props.put("sasl.jaas.config",
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + args[1] + "\" password=\"" + args[2] + "\";");
        List<AclBinding> bindings = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] f = line.trim().split("\\s+");
            if (f.length < 5) continue;
            AclPermissionType permission = f.length > 5 && f[5].equals("DENY")
                ? AclPermissionType.DENY : AclPermissionType.ALLOW;
            bindings.add(new AclBinding(
                new ResourcePattern(ResourceType.valueOf(f[1]), f[3], PatternType.valueOf(f[2])),
                new AccessControlEntry(f[0], "*", AclOperation.valueOf(f[4]), permission)));
        }
        try (Admin admin = Admin.create(props)) {
            admin.createAcls(bindings).all().get();
        }
        System.out.println("created " + bindings.size() + " ACLs");
    }
}
