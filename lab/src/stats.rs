//! The lab's arithmetic on measurements, one home for each helper: a
//! duration in milliseconds, the median of some values, a quantile of
//! sorted latencies. The transcripts, the bench and the lease-store table
//! all count with these, so a figure means the same thing everywhere.

use std::time::Duration;

/// A duration in milliseconds, fractions kept: `1.5 s` is `1500` (which a
/// transcript prints as `1500`), `2.5 ms` is `2.5`.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The median of some values in any order (the mean of the middle two
/// for an even count); NaN for none, which every table prints as `NaN`,
/// never as a plausible number.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The `q` quantile of sorted latencies by nearest rank (`q` = 0.5, 0.9,
/// 0.99): the smallest sample with at least `q` of them at or below it.
/// `None` when there are none: no latency is not a latency of zero.
pub fn quantile(sorted: &[Duration], q: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The `q` quantile of some values in any order, by nearest rank as
/// [`quantile`]; NaN for none, as [`median`].
pub fn quantile_of(values: &[f64], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = (q * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Odd and even counts; the order of the input does not matter; none is NaN.
    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    /// Nearest rank: of 100 values 1..=100, p50 is 50 and p99 is 99; of
    /// 50, p90 is the 45th; of none, nothing.
    #[test]
    fn quantiles_by_nearest_rank() {
        let sorted: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(quantile(&sorted, 0.5), Some(Duration::from_millis(50)));
        assert_eq!(quantile(&sorted, 0.99), Some(Duration::from_millis(99)));
        assert_eq!(quantile(&sorted[..1], 0.99), Some(Duration::from_millis(1)));
        assert_eq!(quantile(&sorted[..50], 0.9), Some(Duration::from_millis(45)));
        assert_eq!(quantile(&[], 0.5), None);
        let values: Vec<f64> = (1..=8).rev().map(f64::from).collect();
        assert_eq!((quantile_of(&values, 0.25), quantile_of(&values, 0.75)), (2.0, 6.0));
        assert!(quantile_of(&[], 0.25).is_nan());
    }

    /// Milliseconds keep their fractions, and whole ones print whole.
    #[test]
    fn durations_in_milliseconds() {
        assert_eq!(ms(Duration::from_micros(2500)), 2.5);
        assert_eq!(ms(Duration::from_millis(1500)).to_string(), "1500");
    }
}
