/**
 * @module
 * The resident job controller's deletion budget (`quartermaster reconcile --watch`): at most `max` deletions
 * (`reconciler.maxDeletionsPerPass`) per window of `windowMs` (`--resync-seconds`, the full pass's period), for
 * every sync and full pass of the process together. A pass (`--once`, `--schedule`) has `max` per pass; a
 * resident controller has no passes to count, so the window stands in for one: a bug or a bad policy cannot
 * delete more in a window than a pass could. A sync that finds the budget spent does what fits and is queued
 * again for when the window turns (`msUntilRefill`).
 *
 * In-memory state of one process, created by the entry point and passed in; the clock is passed to every call.
 */
export class DeletionBudget {
  private windowStart = Number.NEGATIVE_INFINITY;
  private used = 0;

  constructor(
    private readonly max: number,
    private readonly windowMs: number,
  ) {
    if (!Number.isInteger(max) || max < 0) throw new Error(`deletion budget: max ${max} is not a whole number ≥ 0`);
    if (!(windowMs > 0)) throw new Error(`deletion budget: window ${windowMs} ms is not > 0`);
  }

  private roll(now: Date): void {
    const t = now.getTime();
    if (t >= this.windowStart + this.windowMs || t < this.windowStart) {
      this.windowStart = t;
      this.used = 0;
    }
  }

  /** Deletions still allowed in the current window. */
  available(now: Date): number {
    this.roll(now);
    return Math.max(0, this.max - this.used);
  }

  /** Counts `n` deletions sent (they count even when they fail: they were attempted). */
  take(n: number, now: Date): void {
    this.roll(now);
    this.used += n;
  }

  /** Milliseconds until the budget is full again. */
  msUntilRefill(now: Date): number {
    this.roll(now);
    return this.used === 0 ? 0 : Math.max(0, this.windowStart + this.windowMs - now.getTime());
  }
}
