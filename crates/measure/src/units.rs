//! Values scaled for people: `1532.4 ns` is shown as `1.532 µs`, with four significant
//! digits, and every value carries its unit. Files keep the raw, unscaled value.
//!
//! One rule for the whole lab: the reports' tables and the timelines' lanes, statistics and
//! verdicts format through here. It lives in this crate, below both `report` and `trace`,
//! so neither has to depend on the other for it; `schedlab_report::units` re-exports it.

use crate::model::Unit;

/// Scales `value` (in `unit`) to a readable unit and formats it with four significant digits.
pub fn human(value: f64, unit: Unit) -> String {
    if !value.is_finite() {
        return format!("{value} {}", unit.symbol());
    }
    let (v, sym) = match unit {
        Unit::Nanos | Unit::Micros => {
            let ns = if unit == Unit::Micros { value * 1e3 } else { value };
            match ns.abs() {
                x if x >= 1e9 => (ns / 1e9, "s"),
                x if x >= 1e6 => (ns / 1e6, "ms"),
                x if x >= 1e3 => (ns / 1e3, "µs"),
                _ => (ns, "ns"),
            }
        }
        Unit::MibPerSec => {
            if value.abs() >= 1024.0 {
                (value / 1024.0, "GiB/s")
            } else {
                (value, "MiB/s")
            }
        }
        Unit::OpsPerSec => match value.abs() {
            x if x >= 1e9 => (value / 1e9, "G/s"),
            x if x >= 1e6 => (value / 1e6, "M/s"),
            x if x >= 1e3 => (value / 1e3, "k/s"),
            _ => (value, "/s"),
        },
    };
    format!("{} {sym}", sig4(v))
}

/// A duration of `ns` nanoseconds, scaled as [`human`] scales [`Unit::Nanos`]: `850.0 ns`,
/// `12.35 µs`, `4.020 ms`, `1.200 s`.
pub fn human_ns(ns: u64) -> String {
    human(ns as f64, Unit::Nanos)
}

/// Four significant digits, no exponent, trailing zeros kept (so columns line up).
pub fn sig4(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let mag = v.abs().log10().floor() as i32;
    let decimals = (3 - mag).clamp(0, 6) as usize;
    format!("{v:.decimals$}")
}

/// A relative half-width as `±1.2%`.
pub fn percent(rel: f64) -> String {
    if rel >= 0.1 {
        format!("±{:.0}%", rel * 100.0)
    } else {
        format!("±{:.1}%", rel * 100.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_scale_to_readable_units() {
        assert_eq!(human(125.84, Unit::Nanos), "125.8 ns");
        assert_eq!(human(1532.4, Unit::Nanos), "1.532 µs");
        assert_eq!(human(4.33, Unit::Micros), "4.330 µs");
        assert_eq!(human(262.95, Unit::Micros), "262.9 µs");
        assert_eq!(human(3081.5, Unit::Micros), "3.082 ms");
        assert_eq!(human(0.071, Unit::Micros), "71.00 ns");
    }

    #[test]
    fn whole_nanoseconds_scale_like_any_time() {
        assert_eq!(human_ns(850), "850.0 ns");
        assert_eq!(human_ns(12_345), "12.35 µs");
        assert_eq!(human_ns(4_020_000), "4.020 ms");
        assert_eq!(human_ns(1_200_000_000), "1.200 s");
    }

    #[test]
    fn bandwidths_and_rates_scale() {
        assert_eq!(human(5301.44, Unit::MibPerSec), "5.177 GiB/s");
        assert_eq!(human(942.0, Unit::MibPerSec), "942.0 MiB/s");
        assert_eq!(human(230942.0, Unit::OpsPerSec), "230.9 k/s");
    }

    #[test]
    fn percentages_keep_one_decimal_when_small() {
        assert_eq!(percent(0.012), "±1.2%");
        assert_eq!(percent(0.25), "±25%");
    }
}
