// Kafka's own client-side assignors (RangeAssignor, RoundRobinAssignor, CooperativeStickyAssignor from
// kafka-clients) run on group subscriptions read from stdin, for tests/client/test_groups_assignors.py to
// compare kafkawire's assignors with.
//
// stdin, one case per block, blocks separated by a line "end":
//   assignor NAME
//   topic NAME PARTITIONS
//   member ID INSTANCE_ID_OR_- GENERATION TOPIC,TOPIC OWNED_OR_-     (OWNED: topic:partition,topic:partition)
// stdout, per case: "member ID topic:partition,..." lines then "end".
import java.io.*;
import java.nio.ByteBuffer;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.*;
import org.apache.kafka.common.*;

public class AssignorTool {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        String name = null;
        List<PartitionInfo> parts = new ArrayList<>();
        Map<String, Subscription> subs = new LinkedHashMap<>();
        Node node = new Node(0, "localhost", 9092);
        StringBuilder out = new StringBuilder();
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            switch (f[0]) {
                case "assignor": name = f[1]; break;
                case "topic":
                    for (int p = 0; p < Integer.parseInt(f[2]); p++)
                        parts.add(new PartitionInfo(f[1], p, node, new Node[]{node}, new Node[]{node}));
                    break;
                case "member": {
                    List<TopicPartition> owned = new ArrayList<>();
                    if (!f[5].equals("-"))
                        for (String tp : f[5].split(",")) {
                            int i = tp.lastIndexOf(':');
                            owned.add(new TopicPartition(tp.substring(0, i), Integer.parseInt(tp.substring(i + 1))));
                        }
                    Subscription s = new Subscription(Arrays.asList(f[4].split(",")), (ByteBuffer) null, owned,
                            Integer.parseInt(f[3]), Optional.empty());
                    if (!f[2].equals("-")) s.setGroupInstanceId(Optional.of(f[2]));
                    subs.put(f[1], s);
                    break;
                }
                case "end": {
                    ConsumerPartitionAssignor a = switch (name) {
                        case "range" -> new RangeAssignor();
                        case "roundrobin" -> new RoundRobinAssignor();
                        case "cooperative-sticky" -> new CooperativeStickyAssignor();
                        default -> throw new IllegalArgumentException(name);
                    };
                    Cluster cluster = new Cluster("c", List.of(node), parts, Set.of(), Set.of());
                    GroupAssignment ga = a.assign(cluster, new GroupSubscription(subs));
                    for (Map.Entry<String, Assignment> e : ga.groupAssignment().entrySet()) {
                        StringJoiner j = new StringJoiner(",");
                        for (TopicPartition tp : e.getValue().partitions()) j.add(tp.topic() + ":" + tp.partition());
                        out.append("member ").append(e.getKey()).append(" ").append(j.length() == 0 ? "-" : j.toString()).append("\n");
                    }
                    out.append("end\n");
                    parts = new ArrayList<>();
                    subs = new LinkedHashMap<>();
                    break;
                }
                default: break;
            }
        }
        System.out.print(out);
    }
}
