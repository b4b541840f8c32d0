package org.apache.beam.runners.fnexecution.control;

import java.util.concurrent.ThreadLocalRandom;
import org.apache.beam.model.fnexecution.v1.BeamFnApi.BundleApplication;
import org.apache.beam.model.fnexecution.v1.BeamFnApi.DelayedBundleApplication;
import org.apache.beam.model.fnexecution.v1.BeamFnApi.ProcessBundleResponse;
import org.apache.beam.runners.core.StateInternals;
import org.apache.beam.runners.core.StateInternalsFactory;
import org.apache.beam.runners.core.StateNamespace;
import org.apache.beam.runners.core.StateNamespaces;
import org.apache.beam.runners.core.StateTags;
import org.apache.beam.runners.core.TimerInternals;
import org.apache.beam.runners.core.TimerInternalsFactory;
import org.apache.beam.sdk.coders.CoderException;
import org.apache.beam.sdk.coders.Coder;
import org.apache.beam.sdk.state.TimeDomain;
import org.apache.beam.sdk.transforms.windowing.BoundedWindow;
import org.apache.beam.sdk.util.CoderUtils;
import org.apache.beam.sdk.util.WindowedValue;
import org.apache.beam.vendor.grpc.v1p60p1.com.google.protobuf.Duration;
import org.apache.beam.vendor.grpc.v1p60p1.com.google.protobuf.Timestamp;
import org.joda.time.Instant;

/**
 * beamdedup's version of Beam 2.62.0's class of this name, which it replaces on the job server's
 * and the session cluster's classpath (the job server project's classes come first). Same API and
 * the same bookkeeping (a processing-time timer and a value state per residual, both named after
 * the residual), with three changes:
 *
 * <ul>
 *   <li>the delay a splittable DoFn asks to be resumed after is kept to the millisecond, rounded
 *       up (Beam's keeps whole seconds, so any delay under a second resumes at once);
 *   <li>the residual's output watermark, which holds the stage's watermark while it waits, is
 *       kept to the millisecond too (Beam's drops the sub-second part);
 *   <li>the residuals' names are unique across instances of the handler: Beam's count from 1
 *       again in a task restored from a checkpoint, so a new residual could take the name, and
 *       replace the timer and state, of a restored one still waiting.
 * </ul>
 *
 * <p>Each residual still gets a state of its own name here; the streaming operator of the job
 * server (io.github.beamdedup.flink.SplittableStageOperator) keeps those values in one map state
 * instead (Beam issue apache/beam#27648).
 */
@SuppressWarnings({"rawtypes", "unchecked"})
public class BundleCheckpointHandlers {

  /** Reschedules each residual of a bundle with a processing-time timer and a keyed state. */
  public static class StateAndTimerBundleCheckpointHandler<T> implements BundleCheckpointHandler {

    /** The prefix of the timers' (and states') names. */
    public static final String SDF_PREFIX = "sdf_checkpoint";

    private final TimerInternalsFactory<T> timerInternalsFactory;
    private final StateInternalsFactory<T> stateInternalsFactory;
    private final Coder<WindowedValue<T>> residualCoder;
    private final Coder windowCoder;
    private final String instance =
        Long.toString(ThreadLocalRandom.current().nextLong() & Long.MAX_VALUE, 36);
    private long checkpoints;

    public StateAndTimerBundleCheckpointHandler(
        TimerInternalsFactory<T> timerInternalsFactory,
        StateInternalsFactory<T> stateInternalsFactory,
        Coder<WindowedValue<T>> residualCoder,
        Coder windowCoder) {
      this.timerInternalsFactory = timerInternalsFactory;
      this.stateInternalsFactory = stateInternalsFactory;
      this.residualCoder = residualCoder;
      this.windowCoder = windowCoder;
    }

    /** Whether a timer is one of this handler's. */
    public static boolean isSdfTimer(String timerId) {
      return timerId.startsWith(SDF_PREFIX);
    }

    @Override
    public void onCheckpoint(ProcessBundleResponse response) {
      String checkpoint = SDF_PREFIX + ":" + instance + "-" + checkpoints++ + ":";
      Instant now = Instant.now();
      for (int i = 0; i < response.getResidualRootsCount(); i++) {
        DelayedBundleApplication residual = response.getResidualRoots(i);
        if (!residual.hasApplication()) {
          continue;
        }
        WindowedValue<T> value;
        try {
          value =
              CoderUtils.decodeFromByteArray(
                  residualCoder, residual.getApplication().getElement().toByteArray());
        } catch (CoderException e) {
          throw new RuntimeException("Failed to decode a splittable DoFn's residual", e);
        }
        Instant due =
            residual.hasRequestedTimeDelay()
                ? now.plus(org.joda.time.Duration.millis(millisUp(residual.getRequestedTimeDelay())))
                : now;
        Instant hold = watermarkHold(residual.getApplication());
        TimerInternals timers = timerInternalsFactory.timerInternalsForKey(value.getValue());
        StateInternals states = stateInternalsFactory.stateInternalsForKey(value.getValue());
        String name = checkpoint + i;
        for (BoundedWindow window : value.getWindows()) {
          StateNamespace namespace = StateNamespaces.window(windowCoder, window);
          timers.setTimer(namespace, name, "", due, hold, TimeDomain.PROCESSING_TIME);
          states
              .state(namespace, StateTags.value(name, residualCoder))
              .write(
                  WindowedValue.of(value.getValue(), value.getTimestamp(), window, value.getPane()));
        }
      }
    }

    /** A delay in milliseconds, rounded up: a positive delay never becomes none. */
    static long millisUp(Duration d) {
      return d.getSeconds() * 1000 + (d.getNanos() + 999_999) / 1_000_000;
    }

    /**
     * The earliest of the residual's output watermarks, in milliseconds (rounded down: a hold
     * never later than asked); none: the earliest time, as Beam's.
     */
    static Instant watermarkHold(BundleApplication application) {
      if (application.getOutputWatermarksMap().isEmpty()) {
        return BoundedWindow.TIMESTAMP_MIN_VALUE;
      }
      long min = BoundedWindow.TIMESTAMP_MAX_VALUE.getMillis();
      for (Timestamp t : application.getOutputWatermarksMap().values()) {
        min = Math.min(min, t.getSeconds() * 1000 + t.getNanos() / 1_000_000);
      }
      return Instant.ofEpochMilli(min);
    }
  }
}
