import org.apache.kafka.common.utils.Utils;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

/** Reads hex-encoded keys, one per line; prints "murmur2 toPositive(murmur2) % n" for each (n = args[0]). */
public class Murmur2Tool {
    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            byte[] key = new byte[line.length() / 2];
            for (int i = 0; i < key.length; i++) {
                key[i] = (byte) Integer.parseInt(line.substring(2 * i, 2 * i + 2), 16);
            }
            int h = Utils.murmur2(key);
            out.append(h).append(' ').append(Utils.toPositive(h) % n).append('\n');
        }
        System.out.print(out);
    }
}
