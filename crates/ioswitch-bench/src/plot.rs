//! Line charts as plain SVG: one polyline (with point markers) per series, a legend,
//! labelled axes with ticks, and a log2 or linear x axis. Text uses the generic
//! `sans-serif` family and sizes are given in a `viewBox`, so the file renders the same
//! in any browser or viewer without particular fonts installed.

use std::fmt::Write as _;

/// How an axis maps values to positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Proportional, starting at 0.
    Linear,
    /// Logarithmic base 2, ticks at powers of two (for queue depths and block sizes).
    Log2,
}

/// How tick values are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TickFormat {
    /// Plain numbers with as many decimals as the tick step needs (`0`, `2.5`, `100`).
    Number,
    /// Byte sizes with binary units (`512`, `4k`, `128k`, `1M`).
    Bytes,
    /// Counts with SI suffixes (`500`, `250k`, `1.5M`).
    Si,
}

/// One line of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// `(x, y)` points, drawn in the order given. Points that cannot be placed (not
    /// finite, or x ≤ 0 on a log axis) are left out.
    pub points: Vec<(f64, f64)>,
}

/// A line chart.
#[derive(Clone, Debug, PartialEq)]
pub struct LineChart {
    /// Title above the plot.
    pub title: String,
    /// x axis label, with its unit (`queue depth`, `block size (bytes)`).
    pub x_label: String,
    /// y axis label, with its unit (`mean latency (µs)`).
    pub y_label: String,
    /// x axis scale.
    pub x_scale: Scale,
    /// x tick labels.
    pub x_ticks: TickFormat,
    /// y tick labels (the y axis is linear from 0).
    pub y_ticks: TickFormat,
    /// The lines.
    pub series: Vec<Series>,
}

const W: f64 = 820.0;
const H: f64 = 500.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 600.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 430.0;
/// Distinguishable line colours; past the last one lines repeat them dashed.
const COLOURS: [&str; 10] =
    ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];

/// Text safe inside SVG elements and attributes.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            _ => out.push(c),
        }
    }
    out
}

/// A tick value written as `fmt` says; `step` is the distance between ticks (for the
/// number of decimals).
pub fn tick_label(v: f64, step: f64, fmt: TickFormat) -> String {
    match fmt {
        TickFormat::Number => {
            let decimals = if step > 0.0 && step < 1.0 { (-step.log10().floor()) as usize } else { 0 };
            format!("{v:.decimals$}")
        }
        TickFormat::Bytes => {
            for (unit, shift) in [("T", 40), ("G", 30), ("M", 20), ("k", 10)] {
                let d = (1u64 << shift) as f64;
                if v >= d {
                    let x = v / d;
                    return if x.fract() == 0.0 { format!("{x:.0}{unit}") } else { format!("{x:.1}{unit}") };
                }
            }
            format!("{v:.0}")
        }
        TickFormat::Si => {
            let trim = |x: f64, u: &str| {
                let s = format!("{x:.1}");
                format!("{}{u}", s.strip_suffix(".0").unwrap_or(&s))
            };
            if v.abs() >= 1e9 {
                trim(v / 1e9, "G")
            } else if v.abs() >= 1e6 {
                trim(v / 1e6, "M")
            } else if v.abs() >= 1e3 {
                trim(v / 1e3, "k")
            } else {
                trim(v, "")
            }
        }
    }
}

/// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `n` ticks up to `max`.
fn nice_step(max: f64, n: f64) -> f64 {
    let raw = (max / n).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

impl LineChart {
    fn placeable(&self, x: f64, y: f64, log_y: bool) -> bool {
        x.is_finite() && y.is_finite() && (self.x_scale == Scale::Linear || x > 0.0) && (!log_y || y > 0.0)
    }

    fn x_value(&self, x: f64) -> f64 {
        match self.x_scale {
            Scale::Linear => x,
            Scale::Log2 => x.log2(),
        }
    }

    /// The chart as a complete SVG document, the y axis linear from 0.
    pub fn to_svg(&self) -> String {
        self.render(false)
    }

    /// The chart as a complete SVG document with a logarithmic y axis (base 10, ticks at
    /// powers of ten spanning the data); points with y ≤ 0 are left out. For latencies,
    /// where one outlier would flatten everything else on a linear axis.
    pub fn to_svg_log_y(&self) -> String {
        self.render(true)
    }

    fn render(&self, log_y: bool) -> String {
        let pts: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .filter(|&(x, y)| self.placeable(x, y, log_y))
            .collect();
        // x range in axis units (log2 of x on a log axis), padded when there is one value.
        let (mut x0, mut x1) = pts.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &(x, _)| {
            let v = self.x_value(x);
            (a.min(v), b.max(v))
        });
        if !x0.is_finite() {
            (x0, x1) = (0.0, 1.0);
        }
        if self.x_scale == Scale::Log2 {
            x0 = x0.floor();
            x1 = x1.ceil();
        } else if self.x_scale == Scale::Linear && x0 > 0.0 {
            x0 = 0.0;
        }
        if x1 - x0 < 1e-9 {
            x0 -= 1.0;
            x1 += 1.0;
        }
        let ymax_data = pts.iter().map(|&(_, y)| y).fold(0.0f64, f64::max);
        let ystep = nice_step(if ymax_data > 0.0 { ymax_data * 1.05 } else { 1.0 }, 5.0);
        let ymax = ((if ymax_data > 0.0 { ymax_data * 1.05 } else { 1.0 }) / ystep).ceil() * ystep;
        let ymin = pts.iter().map(|&(_, y)| y).fold(0.0f64, f64::min);
        let ymin = if ymin < 0.0 { (ymin / ystep).floor() * ystep } else { 0.0 };
        let px = |v: f64| LEFT + (v - x0) / (x1 - x0) * (RIGHT - LEFT);
        // Log axis: decades from the one below the smallest value to the one above the largest.
        let (mut d0, mut d1) =
            pts.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &(_, y)| (a.min(y.log10()), b.max(y.log10())));
        if !d0.is_finite() {
            (d0, d1) = (0.0, 1.0);
        }
        let (d0, mut d1) = (d0.floor(), d1.ceil());
        if d1 - d0 < 1.0 {
            d1 = d0 + 1.0;
        }
        let py = |y: f64| {
            if log_y {
                BOTTOM - (y.log10() - d0) / (d1 - d0) * (BOTTOM - TOP)
            } else {
                BOTTOM - (y - ymin) / (ymax - ymin) * (BOTTOM - TOP)
            }
        };
        // A tick's label and the step its decimals follow.
        let ytick_step = |y: f64| if log_y { y } else { ystep };

        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" font-family="sans-serif" font-size="13">"#
        );
        let _ = writeln!(s, r#"<rect x="0" y="0" width="{W}" height="{H}" fill="white"/>"#);
        // Bold sans-serif averages about 0.6 em per character: shrink long titles to fit.
        let title_size = (16.0f64).min((W - 20.0) / (0.6 * self.title.chars().count().max(1) as f64)).max(9.0);
        let _ = writeln!(
            s,
            r#"<text class="title" x="{}" y="28" text-anchor="middle" font-size="{title_size:.1}" font-weight="bold">{}</text>"#,
            W / 2.0,
            escape(&self.title)
        );
        // Grid and ticks.
        let _ = writeln!(s, r##"<g class="grid" stroke="#dddddd" stroke-width="1">"##);
        let mut yticks = Vec::new();
        if log_y {
            yticks.extend((d0 as i32..=d1 as i32).map(|k| 10f64.powi(k)));
        } else {
            let mut yt = ymin;
            while yt <= ymax + ystep * 1e-6 {
                yticks.push(yt);
                yt += ystep;
            }
        }
        for &y in &yticks {
            let _ = writeln!(s, r#"<line x1="{LEFT}" y1="{0:.1}" x2="{RIGHT}" y2="{0:.1}"/>"#, py(y));
        }
        let xticks: Vec<f64> = match self.x_scale {
            Scale::Log2 => {
                let n = (x1 - x0).round() as i64;
                let every = (n / 12 + 1).max(1);
                (0..=n).filter(|k| k % every == 0).map(|k| x0 + k as f64).collect()
            }
            Scale::Linear => {
                let step = nice_step(x1 - x0, 8.0);
                let mut v = (x0 / step).ceil() * step;
                let mut t = Vec::new();
                while v <= x1 + step * 1e-6 {
                    t.push(v);
                    v += step;
                }
                t
            }
        };
        for &x in &xticks {
            let _ = writeln!(s, r#"<line x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{BOTTOM}"/>"#, px(x));
        }
        let _ = writeln!(s, "</g>");
        // Axes.
        let _ = writeln!(
            s,
            r##"<g class="axes" stroke="#000000" stroke-width="1.5" fill="none"><polyline points="{LEFT},{TOP} {LEFT},{BOTTOM} {RIGHT},{BOTTOM}"/></g>"##
        );
        let _ = writeln!(s, r#"<g class="ticks" font-size="12">"#);
        for &y in &yticks {
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
                LEFT - 6.0,
                py(y) + 4.0,
                escape(&tick_label(y, ytick_step(y), self.y_ticks))
            );
        }
        let xstep = if xticks.len() > 1 { xticks[1] - xticks[0] } else { 1.0 };
        for &x in &xticks {
            let v = match self.x_scale {
                Scale::Log2 => 2f64.powf(x),
                Scale::Linear => x,
            };
            let step = if self.x_scale == Scale::Log2 { 1.0 } else { xstep };
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
                px(x),
                BOTTOM + 18.0,
                escape(&tick_label(v, step, self.x_ticks))
            );
        }
        let _ = writeln!(s, "</g>");
        let _ = writeln!(
            s,
            r#"<text class="x-label" x="{}" y="{}" text-anchor="middle">{}</text>"#,
            (LEFT + RIGHT) / 2.0,
            BOTTOM + 45.0,
            escape(&self.x_label)
        );
        let ymid = (TOP + BOTTOM) / 2.0;
        let _ = writeln!(
            s,
            r#"<text class="y-label" x="20" y="{ymid}" text-anchor="middle" transform="rotate(-90 20 {ymid})">{}</text>"#,
            escape(&self.y_label)
        );
        if pts.is_empty() {
            let _ = writeln!(
                s,
                r##"<text x="{}" y="{ymid}" text-anchor="middle" fill="#888888">no data</text>"##,
                (LEFT + RIGHT) / 2.0
            );
        }
        // Lines, markers and legend.
        for (i, ser) in self.series.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let dash = if i >= COLOURS.len() { r#" stroke-dasharray="6 4""# } else { "" };
            let mut coords = String::new();
            for &(x, y) in ser.points.iter().filter(|&&(x, y)| self.placeable(x, y, log_y)) {
                let _ = write!(coords, "{:.1},{:.1} ", px(self.x_value(x)), py(y));
            }
            let name = escape(&ser.name);
            let _ = writeln!(s, r#"<g class="series" data-name="{name}">"#);
            let _ = writeln!(
                s,
                r#"<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="{}"/>"#,
                coords.trim_end()
            );
            // A lone point has no line to show it: draw it larger.
            let r = if ser.points.len() == 1 { 5 } else { 3 };
            for &(x, y) in ser.points.iter().filter(|&&(x, y)| self.placeable(x, y, log_y)) {
                let _ = writeln!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="{r}" fill="{colour}"><title>{name}: {} → {}</title></circle>"#,
                    px(self.x_value(x)),
                    py(y),
                    escape(&tick_label(x, 1.0, self.x_ticks)),
                    escape(&tick_label(y, ytick_step(y) / 100.0, self.y_ticks))
                );
            }
            let ly = TOP + 10.0 + i as f64 * 22.0;
            let _ = writeln!(
                s,
                r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{colour}" stroke-width="2"{dash}/>"#,
                RIGHT + 25.0,
                RIGHT + 55.0
            );
            let _ = writeln!(s, r#"<circle cx="{}" cy="{ly}" r="3" fill="{colour}"/>"#, RIGHT + 40.0);
            let _ = writeln!(s, r#"<text x="{}" y="{}">{name}</text>"#, RIGHT + 62.0, ly + 4.0);
            let _ = writeln!(s, "</g>");
        }
        s.push_str("</svg>\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart() -> LineChart {
        LineChart {
            title: "Latency vs queue depth".into(),
            x_label: "queue depth".into(),
            y_label: "mean latency (µs)".into(),
            x_scale: Scale::Log2,
            x_ticks: TickFormat::Number,
            y_ticks: TickFormat::Number,
            series: vec![
                Series { name: "io_uring".into(), points: vec![(1.0, 10.0), (2.0, 12.0), (4.0, 20.0), (32.0, 80.0)] },
                Series { name: "a<b&c".into(), points: vec![(1.0, 5.0), (32.0, 90.0)] },
            ],
        }
    }

    #[test]
    fn the_svg_has_a_polyline_per_series_a_legend_and_labelled_axes() {
        let svg = chart().to_svg();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("viewBox=\"0 0 820 500\"") && svg.contains("font-family=\"sans-serif\""));
        assert_eq!(svg.matches("<polyline fill=\"none\" stroke=\"#").count(), 2);
        assert!(svg.contains(">queue depth</text>") && svg.contains(">mean latency (µs)</text>"));
        assert!(svg.contains(">io_uring</text>"));
        assert!(svg.contains("a&lt;b&amp;c") && !svg.contains("a<b&c"));
        // Log2 ticks at every power of two from 1 to 32.
        for t in ["1", "2", "4", "8", "16", "32"] {
            assert!(svg.contains(&format!(">{t}</text>")), "tick {t}: {svg}");
        }
    }

    /// Coordinate `axis` (0: x, 1: y) of each point of the first series' line in `svg`.
    fn line_coords(svg: &str, axis: usize) -> Vec<f64> {
        let line = svg.lines().find(|l| l.contains("<polyline fill=\"none\"")).unwrap();
        line.split("points=\"")
            .nth(1)
            .unwrap()
            .trim_end_matches("\"/>")
            .split(' ')
            .map(|p| p.split(',').nth(axis).unwrap().parse().unwrap())
            .collect()
    }

    #[test]
    fn log2_points_are_evenly_spaced_per_doubling() {
        let c = LineChart {
            series: vec![Series { name: "s".into(), points: vec![(1.0, 1.0), (2.0, 1.0), (4.0, 1.0)] }],
            ..chart()
        };
        let pts = line_coords(&c.to_svg(), 0);
        assert!(((pts[1] - pts[0]) - (pts[2] - pts[1])).abs() < 0.2, "{pts:?}");
    }

    #[test]
    fn empty_and_unplaceable_data_still_make_a_valid_chart() {
        let c = LineChart {
            series: vec![Series { name: "x".into(), points: vec![(0.0, 1.0), (f64::NAN, 2.0)] }],
            ..chart()
        };
        let svg = c.to_svg();
        assert!(svg.contains("no data") && svg.ends_with("</svg>\n"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn a_log_y_axis_has_a_tick_per_decade_and_spaces_decades_evenly() {
        let c = LineChart {
            x_scale: Scale::Linear,
            series: vec![Series { name: "s".into(), points: vec![(1.0, 2.0), (2.0, 20.0), (3.0, 200.0), (4.0, 0.0)] }],
            ..chart()
        };
        let svg = c.to_svg_log_y();
        for t in ["1", "10", "100", "1000"] {
            assert!(svg.contains(&format!(">{t}</text>")), "tick {t}");
        }
        let ys = line_coords(&svg, 1);
        assert_eq!(ys.len(), 3, "y = 0 has no place on a log axis: {ys:?}");
        assert!(((ys[0] - ys[1]) - (ys[1] - ys[2])).abs() < 0.2, "{ys:?}");
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        // The linear rendering of the same chart keeps the zero.
        assert_eq!(c.to_svg().matches("<circle cx").count(), 4 + 1);
    }

    #[test]
    fn tick_labels_use_the_asked_units() {
        assert_eq!(tick_label(4096.0, 1.0, TickFormat::Bytes), "4k");
        assert_eq!(tick_label(512.0, 1.0, TickFormat::Bytes), "512");
        assert_eq!(tick_label(1048576.0, 1.0, TickFormat::Bytes), "1M");
        assert_eq!(tick_label(250_000.0, 1.0, TickFormat::Si), "250k");
        assert_eq!(tick_label(1_500_000.0, 1.0, TickFormat::Si), "1.5M");
        assert_eq!(tick_label(2.5, 0.5, TickFormat::Number), "2.5");
        assert_eq!(tick_label(100.0, 20.0, TickFormat::Number), "100");
    }
}
