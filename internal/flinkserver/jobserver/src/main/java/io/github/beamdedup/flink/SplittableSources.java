package io.github.beamdedup.flink;

import java.io.IOException;
import java.io.Serializable;
import java.util.HashMap;
import java.util.Map;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.RuntimeContext;
import org.apache.flink.streaming.api.operators.StreamingRuntimeContext;

/**
 * Which subtasks of a job's splittable DoFns are done: a global aggregate on the job's JobManager
 * that each subtask of a splittable stage reports to once its sources have ended (its output
 * watermark at the end of time, no resumption waiting), and that the job's impulses read to end
 * once every one has: the job then ends, as it does when a bounded source ends.
 *
 * <p>Beam's runner keeps the impulses running for as long as the job runs once checkpoints are on
 * (a task that had finished could not be checkpointed before Flink 1.14), so a streaming job whose
 * sources end never ends; without checkpoints it ends the impulses at once, and a splittable
 * source's stage then drains its resumptions at end of input without waiting for them
 * (notes/beam-defects.md). A report counts only for the attempt that made it: after a restart
 * every subtask reports again.
 */
public final class SplittableSources {
  private static final String NAME = "beamdedup.splittable-sources-done";

  private SplittableSources() {}

  /** A subtask's report: done in an attempt of the job's tasks. */
  public static final class Report implements Serializable {
    private static final long serialVersionUID = 1L;
    final String subtask;
    final int attempt;

    Report(String subtask, int attempt) {
      this.subtask = subtask;
      this.attempt = attempt;
    }
  }

  /** Reports a subtask done; subtask names it uniquely within the job. */
  public static void reportDone(RuntimeContext context, String subtask) throws IOException {
    ((StreamingRuntimeContext) context)
        .getGlobalAggregateManager()
        .updateGlobalAggregate(NAME, new Report(subtask, context.getAttemptNumber()), new Done());
  }

  /** How many subtasks reported done in the attempt of the task of context. */
  public static int done(RuntimeContext context) throws IOException {
    Map<String, Integer> done =
        ((StreamingRuntimeContext) context)
            .getGlobalAggregateManager()
            .updateGlobalAggregate(NAME, null, new Done());
    int attempt = context.getAttemptNumber();
    int n = 0;
    for (int a : done.values()) {
      if (a == attempt) {
        n++;
      }
    }
    return n;
  }

  /** Each subtask's latest attempt that reported done; a null report only reads. */
  static final class Done
      implements AggregateFunction<Report, HashMap<String, Integer>, Map<String, Integer>> {
    private static final long serialVersionUID = 1L;

    @Override
    public HashMap<String, Integer> createAccumulator() {
      return new HashMap<>();
    }

    @Override
    public HashMap<String, Integer> add(Report r, HashMap<String, Integer> acc) {
      if (r != null) {
        acc.merge(r.subtask, r.attempt, Math::max);
      }
      return acc;
    }

    @Override
    public Map<String, Integer> getResult(HashMap<String, Integer> acc) {
      return new HashMap<>(acc);
    }

    @Override
    public HashMap<String, Integer> merge(HashMap<String, Integer> a, HashMap<String, Integer> b) {
      b.forEach((k, v) -> a.merge(k, v, Math::max));
      return a;
    }
  }
}
