package io.github.beamdedup.flink;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.AbstractIncrementalStateHandle;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.StreamStateHandle;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot;
import org.apache.flink.core.memory.DataInputViewStreamWrapper;

/**
 * Prints the keyed states a checkpoint or savepoint holds for each operator: a JSON object of
 * operator id to {"states": the most registered states of one subtask, "names": the first of
 * their names}. A state backend writes every state a task registered into each of its
 * checkpoints, so the count is what a task keeps registered.
 *
 * <pre>java -cp CLASSPATH io.github.beamdedup.flink.CheckpointStates DIR (the chk-N or savepoint directory, or its _metadata)</pre>
 */
public final class CheckpointStates {
  private static final int NAMES = 20;

  private CheckpointStates() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      System.err.println("usage: CheckpointStates CHECKPOINT_DIR");
      System.exit(2);
    }
    Path path = Paths.get(args[0]);
    Path metadata = Files.isDirectory(path) ? path.resolve("_metadata") : path;
    ClassLoader cl = CheckpointStates.class.getClassLoader();
    CheckpointMetadata cp;
    try (DataInputStream in = new DataInputStream(Files.newInputStream(metadata))) {
      cp = Checkpoints.loadCheckpointMetadata(in, cl, metadata.getParent().toString());
    }
    Map<String, List<String>> byOperator = new TreeMap<>();
    for (OperatorState op : cp.getOperatorStates()) {
      List<String> most = new ArrayList<>();
      for (OperatorSubtaskState subtask : op.getStates()) {
        for (KeyedStateHandle h : subtask.getManagedKeyedState()) {
          List<String> names = stateNames(h, cl);
          if (names.size() > most.size()) {
            most = names;
          }
        }
      }
      if (!most.isEmpty()) {
        byOperator.put(op.getOperatorID().toHexString(), most);
      }
    }
    StringBuilder out = new StringBuilder("{");
    String sep = "";
    for (Map.Entry<String, List<String>> e : byOperator.entrySet()) {
      out.append(sep).append('"').append(e.getKey()).append("\":{\"states\":").append(e.getValue().size());
      out.append(",\"names\":[");
      List<String> names = e.getValue().subList(0, Math.min(NAMES, e.getValue().size()));
      for (int i = 0; i < names.size(); i++) {
        out.append(i > 0 ? "," : "").append('"').append(names.get(i).replace("\\", "\\\\").replace("\"", "\\\"")).append('"');
      }
      out.append("]}");
      sep = ",";
    }
    System.out.println(out.append('}'));
  }

  /** The names of the states a keyed state handle's serialization proxy lists. */
  private static List<String> stateNames(KeyedStateHandle h, ClassLoader cl) throws IOException {
    StreamStateHandle meta;
    if (h instanceof KeyGroupsStateHandle) {
      meta = (KeyGroupsStateHandle) h;
    } else if (h instanceof AbstractIncrementalStateHandle) {
      meta = ((AbstractIncrementalStateHandle) h).getMetaDataStateHandle();
    } else {
      throw new IOException("unknown keyed state handle " + h.getClass().getName());
    }
    KeyedBackendSerializationProxy<?> proxy = new KeyedBackendSerializationProxy<>(cl);
    try (InputStream in = meta.openInputStream()) {
      proxy.read(new DataInputViewStreamWrapper(in));
    }
    List<String> names = new ArrayList<>();
    for (StateMetaInfoSnapshot s : proxy.getStateMetaInfoSnapshots()) {
      names.add(s.getName());
    }
    return names;
  }
}
