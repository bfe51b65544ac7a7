// Reads kafkawire's transaction files with Kafka's own classes (kafka-storage): a segment's .txnindex through
// TransactionIndex (after its sanityCheck) and a producer snapshot through ProducerStateManager.readSnapshot
// (which checks version and CRC).
//
//   KafkaTxnFiles txnindex <segment base offset> <file>   prints: aborted <pid> <first> <last> <lso>
//   KafkaTxnFiles snapshot <file>                         prints: producer <pid> <epoch> <txn first offset or -1>
import java.io.File;
import org.apache.kafka.common.message.AbortedTxn;
import org.apache.kafka.storage.internals.log.ProducerStateEntry;
import org.apache.kafka.storage.internals.log.ProducerStateManager;
import org.apache.kafka.storage.internals.log.TransactionIndex;

public class KafkaTxnFiles {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("txnindex")) {
            TransactionIndex index = new TransactionIndex(Long.parseLong(args[1]), new File(args[2]));
            index.sanityCheck();
            for (AbortedTxn txn : index.allAbortedTxns()) {
                System.out.println("aborted " + txn.producerId() + " " + txn.firstOffset() + " " + txn.lastOffset()
                    + " " + txn.lastStableOffset());
            }
            index.close();
        } else {
            for (ProducerStateEntry entry : ProducerStateManager.readSnapshot(new File(args[1]))) {
                System.out.println("producer " + entry.producerId() + " " + entry.producerEpoch() + " "
                    + entry.currentTxnFirstOffset().orElse(-1L));
            }
        }
    }
}
