// Prints Kafka's error table as kafka-clients itself defines it, one line per
// error code: code, name, whether its exception is retriable (a subclass of
// RetriableException), and its default message (Errors.message(): the text Kafka
// sends where an error answer carries the code's own message), separated by tabs. tools/gen_spec.py runs it against the
// pinned kafka-clients jar:  java -cp kafka-clients-X.jar tools/java/ErrorTable.java
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.protocol.Errors;

public class ErrorTable {
    public static void main(String[] args) {
        for (Errors error : Errors.values()) {
            ApiException exception = error.exception();
            boolean retriable = exception instanceof RetriableException;
            String message = error.message().replace('\t', ' ').replace('\n', ' ');
            System.out.println(error.code() + "\t" + error.name() + "\t" + retriable + "\t" + message);
        }
    }
}
