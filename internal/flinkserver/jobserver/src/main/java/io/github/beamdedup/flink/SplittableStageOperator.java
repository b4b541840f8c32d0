package io.github.beamdedup.flink;

import java.nio.ByteBuffer;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ScheduledFuture;
import org.apache.beam.model.pipeline.v1.RunnerApi;
import org.apache.beam.runners.core.construction.SerializablePipelineOptions;
import org.apache.beam.runners.core.TimerInternals;
import org.apache.beam.runners.flink.translation.functions.FlinkExecutableStageContextFactory;
import org.apache.beam.runners.flink.translation.utils.Workarounds;
import org.apache.beam.runners.flink.translation.wrappers.streaming.DoFnOperator;
import org.apache.beam.runners.flink.translation.wrappers.streaming.ExecutableStageDoFnOperator;
import org.apache.beam.runners.fnexecution.provisioning.JobInfo;
import org.apache.beam.sdk.coders.Coder;
import org.apache.beam.sdk.options.PipelineOptions;
import org.apache.beam.sdk.util.WindowedValue;
import org.apache.beam.sdk.values.PCollectionView;
import org.apache.beam.sdk.values.TupleTag;
import org.apache.beam.sdk.values.WindowingStrategy;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.runtime.state.KeyedStateBackend;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.InternalPriorityQueue;
import org.apache.flink.streaming.api.operators.InternalTimer;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Beam's operator of an executable stage, for a stage that runs a splittable DoFn (a source), with
 * three changes:
 *
 * <ul>
 *   <li>the residuals of the DoFn's self-checkpoints are kept in one map state
 *       (ResidualStateInternals) instead of a state registered per residual and never released;
 *   <li>at end of input, a resumption still waiting fires when it is due; Beam's operator fires
 *       every waiting one at once, again and again as each asks to be resumed again, until the
 *       sources end: thousands a second, whatever delay they asked for;
 *   <li>once its sources have ended it says so (SplittableSources), so that the job's impulses, and
 *       with them the job, end.
 * </ul>
 */
@SuppressWarnings({"rawtypes", "unchecked"})
public class SplittableStageOperator<InputT, OutputT>
    extends ExecutableStageDoFnOperator<InputT, OutputT> {
  private static final long serialVersionUID = 1L;
  private static final Logger LOG = LoggerFactory.getLogger(SplittableStageOperator.class);
  /** How often a subtask checks whether its sources have ended. */
  private static final long DONE_CHECK_MS = 200;

  private final Coder keyCoderOfStage;
  private final Coder<WindowedValue<InputT>> residualCoder;
  private final boolean reportDone;

  private transient ScheduledFuture<?> doneCheck;
  private transient boolean reported;

  public SplittableStageOperator(
      String stepName,
      Coder<WindowedValue<InputT>> windowedInputCoder,
      Map<TupleTag<?>, Coder<?>> outputCoders,
      TupleTag<OutputT> mainOutputTag,
      List<TupleTag<?>> additionalOutputTags,
      DoFnOperator.MultiOutputOutputManagerFactory<OutputT> outputManagerFactory,
      Map<Integer, PCollectionView<?>> sideInputTagMapping,
      Collection<PCollectionView<?>> sideInputs,
      Map<RunnerApi.ExecutableStagePayload.SideInputId, PCollectionView<?>> sideInputIds,
      PipelineOptions options,
      RunnerApi.ExecutableStagePayload payload,
      JobInfo jobInfo,
      FlinkExecutableStageContextFactory contextFactory,
      Map<String, TupleTag<?>> outputMap,
      WindowingStrategy windowingStrategy,
      Coder keyCoder,
      KeySelector<WindowedValue<InputT>, ?> keySelector,
      boolean reportDone) {
    super(
        stepName,
        windowedInputCoder,
        outputCoders,
        mainOutputTag,
        additionalOutputTags,
        outputManagerFactory,
        sideInputTagMapping,
        sideInputs,
        sideInputIds,
        options,
        payload,
        jobInfo,
        contextFactory,
        outputMap,
        windowingStrategy,
        keyCoder,
        keySelector);
    this.keyCoderOfStage = keyCoder;
    this.residualCoder = windowedInputCoder;
    this.reportDone = reportDone;
  }

  @Override
  public void initializeState(StateInitializationContext context) throws Exception {
    super.initializeState(context);
    // Before anything reads the keyed state: the residual handler and the timers read it through
    // this field.
    keyedStateInternals =
        new ResidualStateInternals<>(
            (KeyedStateBackend<ByteBuffer>) (KeyedStateBackend) getKeyedStateBackend(),
            keyCoderOfStage,
            serializedOptions,
            residualCoder);
  }

  @Override
  public void open() throws Exception {
    super.open();
    if (reportDone) {
      doneCheck =
          getProcessingTimeService()
              .scheduleWithFixedDelay(ts -> reportIfDone(), DONE_CHECK_MS, DONE_CHECK_MS);
    }
  }

  /** Sources ended: the output watermark at the end of time, no resumption waiting. */
  private boolean sourcesEnded() {
    return getCurrentOutputWatermark() >= Watermark.MAX_WATERMARK.getTimestamp()
        && numProcessingTimeTimers() == 0;
  }

  private void reportIfDone() throws Exception {
    if (reported || !sourcesEnded()) {
      return;
    }
    reported = true;
    doneCheck.cancel(false);
    LOG.info("{}: its splittable sources have ended", getOperatorName());
    SplittableSources.reportDone(
        getRuntimeContext(),
        getOperatorID() + "#" + getRuntimeContext().getIndexOfThisSubtask());
  }

  @Override
  public void flushData() throws Exception {
    // Flink quiesces an operator's processing-time timers before it finishes it, so Beam's
    // operator fires the waiting resumptions itself, all at once and again as each asks to be
    // resumed. Here each fires when it is due; the task sleeps meanwhile. (The job's impulses end
    // only once the sources have, so this runs when a job set shutdown_sources_after_idle_ms or
    // is drained: no checkpoint completes while it runs, the barrier waits behind the end of
    // input.)
    processWatermark1(Watermark.MAX_WATERMARK);
    InternalPriorityQueue<InternalTimer<Object, TimerInternals.TimerData>> timers =
        Workarounds.retrieveInternalProcessingTimerQueue(timerService);
    while (getCurrentOutputWatermark() < Watermark.MAX_WATERMARK.getTimestamp()) {
      invokeFinishBundle();
      InternalTimer<Object, TimerInternals.TimerData> next = timers.peek();
      if (next == null) {
        break;
      }
      long wait = next.getTimestamp() - getProcessingTimeService().getCurrentProcessingTime();
      if (wait > 0) {
        Thread.sleep(Math.min(wait, DONE_CHECK_MS));
        continue;
      }
      timers.poll();
      getKeyedStateBackend().setCurrentKey(next.getKey());
      onProcessingTime((InternalTimer) next);
    }
    super.flushData();
  }

  @Override
  public void close() throws Exception {
    if (doneCheck != null) {
      doneCheck.cancel(false);
    }
    super.close();
  }
}
