//! The raw samples of one result as one compact value (schema version 5: `raw_samples.data`).
//!
//! Until version 4 every sample was a row of seven columns: in PostgreSQL about 120 bytes
//! with its tuple header and its share of the primary key, 2.7 of the 5.2 MB a quick run
//! took (22,800 samples). A result's samples are now one blob of a few bytes per sample,
//! lossless — every field of every [`Sample`] comes back bit for bit, so a run shows and
//! compares exactly as before — and without any compression library: the fields are stored
//! column by column, where each column is regular.
//!
//! ```text
//! u8      format, 1
//! varint  n, the number of samples
//! ints    iters          (one column of n integers, below)
//! ints    elapsed_ns
//! u8      other_cpu_ns:  0 every one absent | 1 every one present: ints | 2 some: bitmap, ints of those present
//! u8      migrated:      0 none | 1 bitmap
//! u8      predictor of value (0 the previous value, 1 linear in elapsed/iters, 2 inverse in it)
//! n ×     value: its bits XOR the predictor's bits, as one byte (leading zero bytes << 4 |
//!         trailing zero bytes) and the bytes between them, most significant first
//!
//! ints:   u8 0 then one zigzag varint: every value the same (iters: one per result)
//!         u8 1 then n zigzag varints: each the difference from the one before (the first from 0)
//!         u8 2 then varint g, then n zigzag varints: those differences divided by g, their
//!              greatest common divisor (other_cpu_ns comes in clock ticks of 10 ms)
//! bitmap: ceil(n/8) bytes, sample i in bit i%8 of byte i/8
//! ```
//!
//! The value column is Gorilla's idea (Pelkonen et al., "Gorilla: A Fast, Scalable, In-Memory
//! Time Series Database", VLDB 2015: a float XOR its predecessor has long runs of zero bits),
//! at byte rather than bit granularity, with a better predecessor where one exists: a time per
//! operation is `elapsed/iters − overhead` scaled, so it is linear in `elapsed/iters`, and a
//! bandwidth its inverse; the line through the first two samples predicts the others to their
//! last few bits. The encoder tries the three predictors and keeps the shortest. A prediction
//! uses only IEEE 754's correctly rounded `+ − × ÷` on values already decoded, so the decoder
//! computes the same bits on any machine; one that is not finite is replaced by 0, since a
//! NaN's payload differs between CPUs.

use schedlab_measure::model::Sample;

/// The format byte this build writes (and the only one it reads).
const FORMAT: u8 = 1;

/// Why a stored blob could not be decoded: it was cut short, or written by something else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

/// Encodes `samples` (in order) as one blob.
pub fn encode(samples: &[Sample]) -> Vec<u8> {
    let n = samples.len();
    let mut out = Vec::with_capacity(8 + n * 8);
    out.push(FORMAT);
    varint(&mut out, n as u64);
    let iters: Vec<i64> = samples.iter().map(|s| s.iters as i64).collect();
    let elapsed: Vec<i64> = samples.iter().map(|s| s.elapsed_ns as i64).collect();
    ints(&mut out, &iters);
    ints(&mut out, &elapsed);
    let present: Vec<bool> = samples.iter().map(|s| s.other_cpu_ns.is_some()).collect();
    let other: Vec<i64> = samples.iter().filter_map(|s| s.other_cpu_ns).collect();
    if other.is_empty() {
        out.push(0);
    } else if other.len() == n {
        out.push(1);
        ints(&mut out, &other);
    } else {
        out.push(2);
        bitmap(&mut out, &present);
        ints(&mut out, &other);
    }
    let migrated: Vec<bool> = samples.iter().map(|s| s.migrated).collect();
    if migrated.iter().any(|&m| m) {
        out.push(1);
        bitmap(&mut out, &migrated);
    } else {
        out.push(0);
    }
    let values: Vec<f64> = samples.iter().map(|s| s.value).collect();
    let best = (0..PREDICTORS)
        .map(|p| {
            let mut v = Vec::new();
            residuals(&mut v, p, &values, &iters, &elapsed);
            (v.len(), p, v)
        })
        .min_by_key(|(len, p, _)| (*len, *p))
        .expect("there is at least one predictor");
    out.push(best.1);
    out.extend_from_slice(&best.2);
    out
}

/// Decodes a blob [`encode`] made.
///
/// # Errors
/// [`Malformed`] when the blob is cut short, has bytes left over, or is of another format.
pub fn decode(data: &[u8]) -> Result<Vec<Sample>, Malformed> {
    let mut r = Reader { data, at: 0 };
    if r.byte()? != FORMAT {
        return Err(Malformed("an unknown format byte"));
    }
    let n = r.varint()?;
    // Every sample takes at least one byte (its value's header): a count beyond what is
    // left is a corrupt blob, not a reason to allocate.
    if n > data.len() as u64 {
        return Err(Malformed("a sample count larger than the blob"));
    }
    let n = n as usize;
    let iters = r.ints(n)?;
    let elapsed = r.ints(n)?;
    let other: Vec<Option<i64>> = match r.byte()? {
        0 => vec![None; n],
        1 => r.ints(n)?.into_iter().map(Some).collect(),
        2 => {
            let present = r.bitmap(n)?;
            let k = present.iter().filter(|&&p| p).count();
            let mut vals = r.ints(k)?.into_iter();
            present.iter().map(|&p| if p { vals.next() } else { None }).collect()
        }
        _ => return Err(Malformed("an unknown other_cpu_ns mode")),
    };
    let migrated = match r.byte()? {
        0 => vec![false; n],
        1 => r.bitmap(n)?,
        _ => return Err(Malformed("an unknown migrated mode")),
    };
    let predictor = r.byte()?;
    if predictor >= PREDICTORS {
        return Err(Malformed("an unknown predictor"));
    }
    let mut values: Vec<f64> = Vec::with_capacity(n);
    for i in 0..n {
        let header = r.byte()?;
        let (lead, trail) = ((header >> 4) as usize, (header & 0x0f) as usize);
        if lead + trail > 8 {
            return Err(Malformed("a value header over 8 bytes"));
        }
        let mut bits = 0u64;
        for _ in 0..8 - lead - trail {
            bits = bits << 8 | u64::from(r.byte()?);
        }
        let residual = if lead + trail == 8 { 0 } else { bits << (8 * trail) };
        let p = predict(predictor, i, &values, &iters, &elapsed);
        values.push(f64::from_bits(p ^ residual));
    }
    if r.at != data.len() {
        return Err(Malformed("bytes after the last sample"));
    }
    Ok((0..n)
        .map(|i| Sample {
            iters: iters[i] as u64,
            elapsed_ns: elapsed[i] as u64,
            value: values[i],
            other_cpu_ns: other[i],
            migrated: migrated[i],
        })
        .collect())
}

const PREDICTORS: u8 = 3;

/// The predicted bits of value `i` from the values before it: 0 the previous one; 1 the line
/// through the first two in `x = elapsed/iters`; 2 `v0 · x0 / x`. Deterministic (see the file's
/// header); anything not finite becomes 0.
fn predict(p: u8, i: usize, values: &[f64], iters: &[i64], elapsed: &[i64]) -> u64 {
    let prev = if i == 0 { 0.0 } else { values[i - 1] };
    let x = |k: usize| elapsed[k] as u64 as f64 / iters[k] as u64 as f64;
    let guess = match (p, i) {
        (0, _) | (_, 0) => prev,
        (1, 1) => values[0],
        (1, _) => {
            let slope = (values[1] - values[0]) / (x(1) - x(0));
            values[0] + (x(i) - x(0)) * slope
        }
        _ => values[0] * x(0) / x(i),
    };
    let guess = if guess.is_finite() { guess } else { prev };
    if guess.is_finite() {
        guess.to_bits()
    } else {
        0
    }
}

fn residuals(out: &mut Vec<u8>, p: u8, values: &[f64], iters: &[i64], elapsed: &[i64]) {
    for (i, v) in values.iter().enumerate() {
        let r = v.to_bits() ^ predict(p, i, &values[..i], iters, elapsed);
        if r == 0 {
            out.push(0x80);
            continue;
        }
        let lead = r.leading_zeros() as usize / 8;
        let trail = r.trailing_zeros() as usize / 8;
        out.push((lead << 4 | trail) as u8);
        let bytes = r.to_be_bytes();
        out.extend_from_slice(&bytes[lead..8 - trail]);
    }
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    (v << 1 ^ v >> 63) as u64
}

fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// One column of integers (see the file's header for the three modes).
fn ints(out: &mut Vec<u8>, vals: &[i64]) {
    if vals.windows(2).all(|w| w[0] == w[1]) {
        out.push(0);
        varint(out, zigzag(vals.first().copied().unwrap_or(0)));
        return;
    }
    let mut prev = 0i64;
    let deltas: Vec<i64> = vals
        .iter()
        .map(|&v| {
            let d = v.wrapping_sub(prev);
            prev = v;
            d
        })
        .collect();
    let g = deltas.iter().fold(0u64, |g, d| gcd(g, d.unsigned_abs()));
    if g > 1 && g <= i64::MAX as u64 {
        out.push(2);
        varint(out, g);
        for d in deltas {
            varint(out, zigzag(d / g as i64));
        }
    } else {
        out.push(1);
        for d in deltas {
            varint(out, zigzag(d));
        }
    }
}

fn bitmap(out: &mut Vec<u8>, bits: &[bool]) {
    for chunk in bits.chunks(8) {
        out.push(chunk.iter().enumerate().fold(0u8, |b, (i, &on)| b | (u8::from(on) << i)));
    }
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, Malformed> {
        let b = *self.data.get(self.at).ok_or(Malformed("cut short"))?;
        self.at += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, Malformed> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Malformed("a varint over 64 bits"))
    }

    fn ints(&mut self, n: usize) -> Result<Vec<i64>, Malformed> {
        match self.byte()? {
            0 => Ok(vec![unzigzag(self.varint()?); n]),
            mode @ (1 | 2) => {
                let g = if mode == 2 { self.varint()? as i64 } else { 1 };
                let mut prev = 0i64;
                (0..n)
                    .map(|_| {
                        prev = prev.wrapping_add(unzigzag(self.varint()?).wrapping_mul(g));
                        Ok(prev)
                    })
                    .collect()
            }
            _ => Err(Malformed("an unknown integer column mode")),
        }
    }

    fn bitmap(&mut self, n: usize) -> Result<Vec<bool>, Malformed> {
        let mut bits = Vec::with_capacity(n);
        for _ in 0..n.div_ceil(8) {
            let b = self.byte()?;
            bits.extend((0..8).map(|i| b >> i & 1 == 1));
        }
        bits.truncate(n);
        Ok(bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(iters: u64, elapsed_ns: u64, value: f64, other: Option<i64>, migrated: bool) -> Sample {
        Sample { iters, elapsed_ns, value, other_cpu_ns: other, migrated }
    }

    /// Bit-exact equality, NaN payloads and the sign of zero included.
    fn same(a: &[Sample], b: &[Sample]) -> bool {
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| {
                x.iters == y.iters
                    && x.elapsed_ns == y.elapsed_ns
                    && x.value.to_bits() == y.value.to_bits()
                    && x.other_cpu_ns == y.other_cpu_ns
                    && x.migrated == y.migrated
            })
    }

    fn round_trip(samples: &[Sample]) -> usize {
        let blob = encode(samples);
        let back = decode(&blob).expect("decodes");
        assert!(same(samples, &back), "{samples:?}\n{back:?}");
        blob.len()
    }

    #[test]
    fn a_real_results_samples_come_back_bit_for_bit_in_a_few_bytes_each() {
        // os.syscall.fstat of a quick run (2026-11-27): value = (elapsed/iters − overhead).
        let rows = [
            (10672880, 277.13240151462, -10000000),
            (10836174, 281.376560059129, 20000000),
            (10955722, 284.483720552956, 0),
            (11203832, 290.93232354191, 0),
            (11167898, 289.998366426901, -20000000),
            (11042742, 286.745448948018, 10000000),
            (11142701, 289.343473639376, 0),
            (11104254, 288.344201384665, 0),
            (10936032, 283.971959669266, 0),
        ];
        let samples: Vec<Sample> =
            rows.iter().map(|&(e, v, o)| s(38475, e, v, Some(o), false)).collect();
        let len = round_trip(&samples);
        // As rows these were 9 × 7 columns; here well under 10 bytes a sample.
        assert!(len < 9 * 10, "{len} bytes");
    }

    #[test]
    fn every_kind_of_field_comes_back() {
        round_trip(&[]);
        round_trip(&[s(1, 0, 0.0, None, false)]);
        round_trip(&[s(u64::MAX, u64::MAX, f64::MAX, Some(i64::MIN), true)]);
        round_trip(&[
            s(3, 5, -0.0, Some(i64::MAX), true),
            s(u64::MAX, 0, f64::NAN, None, false),
            s(0, u64::MAX, f64::INFINITY, Some(i64::MIN), true),
            s(7, 1, f64::NEG_INFINITY, Some(0), false),
            s(7, 2, f64::from_bits(0x7ff0_0000_0000_0001), None, false),
            s(7, 2, f64::MIN_POSITIVE / 2.0, Some(-1), false),
            s(0, 0, 1e300, None, true),
            s(1, 3, 2.5, Some(10), false),
            s(1, 3, 2.5, Some(10), false),
        ]);
    }

    #[test]
    fn pseudo_random_samples_come_back() {
        // A small xorshift generator: many shapes of column, deterministic.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for case in 0..500 {
            let n = (next() % 40) as usize;
            let samples: Vec<Sample> = (0..n)
                .map(|_| {
                    let r = next();
                    let iters = if case % 3 == 0 { 1000 } else { r % 5000 };
                    let elapsed = if case % 5 == 0 { next() } else { 1_000_000 + next() % 50_000 };
                    let value = match case % 4 {
                        0 => f64::from_bits(next()),
                        1 => elapsed as f64 / iters.max(1) as f64 - 0.25,
                        2 => 1e9 / elapsed as f64,
                        _ => (next() % 100) as f64,
                    };
                    let other = match r % 3 {
                        0 => None,
                        1 => Some((next() % 5) as i64 * 10_000_000 - 20_000_000),
                        _ => Some(next() as i64),
                    };
                    s(iters, elapsed, value, other, r % 7 == 0)
                })
                .collect();
            round_trip(&samples);
        }
    }

    #[test]
    fn a_damaged_blob_is_refused_not_misread() {
        let blob = encode(&[s(10, 100, 1.5, Some(0), false), s(10, 120, 1.7, None, true)]);
        for cut in 0..blob.len() {
            assert!(decode(&blob[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = blob.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
        let mut other = blob;
        other[0] = 9;
        assert_eq!(decode(&other), Err(Malformed("an unknown format byte")));
        // A count far beyond the blob does not allocate it.
        assert!(decode(&[FORMAT, 0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
    }
}
