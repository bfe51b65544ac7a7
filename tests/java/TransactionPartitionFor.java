import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.utils.Utils;

/**
 * For each line of stdin (a transactional id as hex of its UTF-8 bytes), prints the id's String.hashCode and,
 * for each partition count given as an argument, Utils.abs(hashCode) % count: the partition of
 * __transaction_state Kafka's TransactionStateManager.partitionFor picks.
 */
public class TransactionPartitionFor {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        String line;
        while ((line = in.readLine()) != null) {
            byte[] bytes = new byte[line.length() / 2];
            for (int i = 0; i < bytes.length; i++)
                bytes[i] = (byte) Integer.parseInt(line.substring(2 * i, 2 * i + 2), 16);
            String id = new String(bytes, StandardCharsets.UTF_8);
            StringBuilder out = new StringBuilder().append(id.hashCode());
            for (String count : args)
                out.append(' ').append(Utils.abs(id.hashCode()) % Integer.parseInt(count));
            System.out.println(out);
        }
    }
}
