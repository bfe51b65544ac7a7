import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

/**
 * The calls of tests/cluster/test_admin.py made by Kafka's own Admin, through the same proxy, so that the test
 * can compare where each request went. Args: bootstrap topic partitions deleteBefore newPartitionCount.
 */
public class AdminRouting {
    public static void main(String[] args) throws Exception {
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        long before = Long.parseLong(args[3]);
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "java-admin-routing");
        try (Admin admin = Admin.create(props)) {
            admin.describeTopics(List.of(topic)).allTopicNames().get();
            Set<TopicPartition> tps = new HashSet<>();
            Map<TopicPartition, RecordsToDelete> delete = new HashMap<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
                delete.put(new TopicPartition(topic, p), RecordsToDelete.beforeOffset(before + p));
            }
            System.out.println("elect " + admin.electLeaders(ElectionType.PREFERRED, tps).partitions().get());
            admin.deleteRecords(delete).all().get();
            ConfigResource broker2 = new ConfigResource(ConfigResource.Type.BROKER, "2");
            admin.describeConfigs(List.of(broker2)).all().get();
            AlterConfigOp set = new AlterConfigOp(new ConfigEntry("message.max.bytes", "1048588"), AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(broker2, List.of(set)), new AlterConfigsOptions().validateOnly(true))
                .all().get();
            admin.describeLogDirs(List.of(1, 3)).allDescriptions().get();
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(Integer.parseInt(args[4])))).all().get();
        }
    }
}
