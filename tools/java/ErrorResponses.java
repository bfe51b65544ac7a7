// Kafka's own error answer for a request: parses each request body with kafka-clients and prints
// the body of AbstractRequest.getErrorResponse(0, exception), the answer a Kafka broker sends when
// handling the request throws. kafkawire's tests compare it with broker/dispatch.py's error_response
// (tests/broker/test_error_answers.py). The same source runs against kafka-clients 4.4 and 3.9.1 (the
// versions 4.0 removed), whose parseRequest signatures differ, hence the reflection.
//
//   java -cp <kafka-clients classpath> tools/java/ErrorResponses.java [--api-keys] < requests
//
// stdin: one request per line, "<api key> <version> <body hex>"; stdout: one line per request,
// "<api key> <version> OK <response body hex>", "<api key> <version> NONE" when Kafka sends no answer,
// "<api key> <version> INVALID <why>" when Kafka refuses to parse the request, or
// "<api key> <version> FAIL <what getErrorResponse threw>".
// --api-keys prints "<id>\t<ApiKeys name>" for every API key this kafka-clients defines, then exits.
// The exception is an unexpected RuntimeException with a message, as a failing handler throws; Kafka
// maps it to UNKNOWN_SERVER_ERROR.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.RequestAndSize;

public class ErrorResponses {
    public static final String MESSAGE = "injected handler failure";

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("--api-keys")) {
            for (ApiKeys key : ApiKeys.values()) {
                System.out.println(key.id + "\t" + key.name());
            }
            return;
        }
        Method parse = parseMethod();
        HexFormat hex = HexFormat.of();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        for (String line; (line = in.readLine()) != null; ) {
            if (line.isBlank()) continue;
            String[] parts = line.trim().split(" ", -1);
            short key = Short.parseShort(parts[0]);
            short version = Short.parseShort(parts[1]);
            byte[] body = parts.length > 2 ? hex.parseHex(parts[2]) : new byte[0];
            out.append(key).append(' ').append(version).append(' ');
            try {
                ByteBuffer buffer = ByteBuffer.wrap(body);
                Object source = parse.getParameterTypes()[2] == ByteBuffer.class ? buffer : new ByteBufferAccessor(buffer);
                RequestAndSize parsed;
                try {
                    parsed = (RequestAndSize) parse.invoke(null, ApiKeys.forId(key), version, source);
                } catch (InvocationTargetException e) {
                    // Kafka refuses the request itself (an UNKNOWN ACL filter): no error answer to compare
                    out.append("INVALID ").append(oneLine(e.getCause())).append('\n');
                    continue;
                }
                AbstractResponse response = parsed.request.getErrorResponse(0, new RuntimeException(MESSAGE));
                // null: no answer at all (a Produce with acks=0)
                out.append(response == null ? "NONE" : "OK " + hex.formatHex(serialize(response.data(), version)));
            } catch (RuntimeException e) {
                out.append("FAIL ").append(oneLine(e));
            }
            out.append('\n');
        }
        System.out.print(out);
    }

    static Method parseMethod() {
        for (Method m : AbstractRequest.class.getMethods()) {
            if (m.getName().equals("parseRequest") && m.getParameterCount() == 3) return m;
        }
        throw new IllegalStateException("no AbstractRequest.parseRequest(ApiKeys, short, ...) in this kafka-clients");
    }

    static byte[] serialize(ApiMessage message, short version) {
        ObjectSerializationCache cache = new ObjectSerializationCache();
        ByteBuffer buffer = ByteBuffer.allocate(message.size(cache, version));
        message.write(new ByteBufferAccessor(buffer), cache, version);
        return buffer.array();
    }

    static String oneLine(Throwable e) {
        return (e.getClass().getName() + ": " + e.getMessage()).replace('\n', ' ');
    }
}
