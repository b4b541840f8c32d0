package org.apache.beam.runners.flink.translation.functions;

import io.github.beamdedup.flink.SplittableSources;
import org.apache.beam.sdk.util.WindowedValue;
import org.apache.beam.vendor.guava.v32_1_2_jre.com.google.common.collect.Iterables;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeutils.base.BooleanSerializer;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.functions.source.RichSourceFunction;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * beamdedup's version of Beam 2.62.0's source of this name (it replaces Beam's on the job server's
 * and the session cluster's classpath): a job's impulse, one empty element and the final
 * watermark, with the same state (whether the impulse was emitted, so a restored job does not
 * emit it again).
 *
 * <p>Beam's stays up for its idle timeout after the impulse: for as long as the job runs when
 * checkpoints are on (Long.MAX_VALUE), so that a streaming job whose sources end never ends; not
 * at all without checkpoints, so that a splittable source's stage meets its end of input while
 * its source still runs (notes/beam-defects.md). The job server's translation
 * (io.github.beamdedup.flink.SplittableStreamingTranslator) tells this one how many subtasks of
 * splittable stages the job has ({@link #endWhenSplittableSourcesEnd}): it then ends once each
 * has reported its sources ended (at once when there are none), or at its idle timeout, or when
 * cancelled, whichever comes first.
 */
public class ImpulseSourceFunction extends RichSourceFunction<WindowedValue<byte[]>>
    implements CheckpointedFunction {
  private static final long serialVersionUID = 1L;
  private static final Logger LOG = LoggerFactory.getLogger(ImpulseSourceFunction.class);
  /** How often it asks whether the splittable sources have ended. */
  private static final long POLL_MS = 250;

  private final long idleTimeoutMs;
  /** Subtasks of splittable stages to wait for; negative: only the idle timeout. */
  private int splittableSubtasks = -1;

  private volatile boolean running = true;
  private transient ListState<Boolean> impulseEmitted;

  public ImpulseSourceFunction(long idleTimeoutMs) {
    this.idleTimeoutMs = idleTimeoutMs;
  }

  /** Ends the impulse once subtasks subtasks of splittable stages have reported done. */
  public void endWhenSplittableSourcesEnd(int subtasks) {
    this.splittableSubtasks = subtasks;
  }

  @Override
  public void run(SourceContext<WindowedValue<byte[]>> ctx) throws Exception {
    if (Iterables.isEmpty(impulseEmitted.get())) {
      synchronized (ctx.getCheckpointLock()) {
        ctx.collect(WindowedValue.valueInGlobalWindow(new byte[0]));
        impulseEmitted.add(true);
      }
    }
    // After a restore too: it sets the operators' watermark and fires their pending timers.
    ctx.emitWatermark(Watermark.MAX_WATERMARK);
    if (splittableSubtasks == 0) {
      return;
    }
    long start = System.currentTimeMillis();
    while (running && System.currentTimeMillis() - start < idleTimeoutMs) {
      if (splittableSubtasks >= 0
          && SplittableSources.done(getRuntimeContext()) >= splittableSubtasks) {
        LOG.info("Impulse: the job's splittable sources have ended; so does the impulse");
        return;
      }
      long left = idleTimeoutMs - (System.currentTimeMillis() - start);
      try {
        Thread.sleep(Math.max(1, Math.min(POLL_MS, left)));
      } catch (InterruptedException e) {
        if (!running) {
          Thread.currentThread().interrupt();
          return;
        }
      }
    }
  }

  @Override
  public void cancel() {
    running = false;
  }

  @Override
  public void snapshotState(FunctionSnapshotContext context) {}

  @Override
  public void initializeState(FunctionInitializationContext context) throws Exception {
    impulseEmitted =
        context
            .getOperatorStateStore()
            .getListState(new ListStateDescriptor<>("impulse-emitted", BooleanSerializer.INSTANCE));
  }
}
