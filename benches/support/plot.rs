//! SVG charts for the benchmarks' results (committed under `docs/bench/` and
//! shown in the README). Include it with
//! `#[path = "support/plot.rs"] mod plot;`.
//!
//! Text is written as SVG `<text>` elements and drawn by whatever shows the
//! file (a browser, GitHub), so no font files are read: plotters is built
//! without a font backend and places labels with its approximate text metrics.

#![allow(dead_code)]

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

const SIZE: (u32, u32) = (960, 600);

/// Distinct colours for up to 8 series (they repeat beyond).
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Options of [`line_chart_with`].
#[derive(Clone, Copy, Default)]
pub struct LineChartOptions {
    /// Y on a log10 scale (every y must then be > 0; others are left out).
    pub log_y: bool,
}

/// Several named series of (x, y) points, joined by lines with each point
/// marked, and a legend.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(&str, Vec<(f64, f64)>)],
) -> Result<()> {
    line_chart_with(path, title, x_label, y_label, series, LineChartOptions::default())
}

/// [`line_chart`] with options (log-scale Y).
pub fn line_chart_with(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(&str, Vec<(f64, f64)>)],
    options: LineChartOptions,
) -> Result<()> {
    // A log axis is drawn as a linear axis of log10(y) whose tick labels show
    // 10^tick: one code path for both scales.
    let y_of = |y: f64| if options.log_y { y.log10() } else { y };
    let plotted: Vec<(&str, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(name, points)| {
            let points = points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite() && (!options.log_y || *y > 0.0))
                .map(|&(x, y)| (x, y_of(y)))
                .collect();
            (*name, points)
        })
        .collect();
    let all = plotted.iter().flat_map(|(_, p)| p.iter().copied());
    let (x_range, y_range) = bounds(all, !options.log_y);
    let y_label_of = move |v: &f64| if options.log_y { short(10f64.powf(*v)) } else { short(*v) };
    draw(
        path,
        title,
        x_label,
        y_label,
        &plotted,
        x_range,
        y_range,
        &|v: &f64| short(*v),
        &y_label_of,
        true,
        SeriesLabelPosition::UpperLeft,
    )
}

/// For each named series of latency samples (ms), its cumulative
/// distribution: x = latency (ms, log scale), y = fraction of samples at or
/// under it; with a legend.
pub fn distribution_chart(path: &Path, title: &str, x_label: &str, series: &[(&str, Vec<f64>)]) -> Result<()> {
    // A log x axis: latencies span 0.1 ms to seconds, and the tail is what matters.
    let plotted: Vec<(&str, Vec<(f64, f64)>)> =
        series.iter().map(|(name, samples)| (*name, cumulative(samples))).collect();
    let all = plotted.iter().flat_map(|(_, p)| p.iter().copied());
    let (x_range, _) = bounds(all, false);
    let x_label_of = |v: &f64| short(10f64.powf(*v));
    let x_label = format!("{x_label} (log scale)");
    draw(
        path,
        title,
        &x_label,
        "fraction delivered within",
        &plotted,
        x_range,
        0.0..1.0,
        &x_label_of,
        &|v: &f64| format!("{v:.1}"),
        false,
        // Distributions rise from the lower left to the upper right: the upper left stays clear.
        SeriesLabelPosition::UpperLeft,
    )
}

/// The empirical CDF of `samples` as (log10(ms), fraction) points, thinned to
/// at most ~1,000 points (charts of millions of samples stay small).
fn cumulative(samples: &[f64]) -> Vec<(f64, f64)> {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).map(|v| v.max(1e-3)).collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n == 0 {
        return Vec::new();
    }
    let step = n.div_ceil(1000).max(1);
    let mut points: Vec<(f64, f64)> =
        (0..n).step_by(step).map(|i| (sorted[i].log10(), (i + 1) as f64 / n as f64)).collect();
    points.push((sorted[n - 1].log10(), 1.0));
    points
}

/// The ranges covering every point, with a little room; `y_from_zero` keeps 0 in the Y range.
fn bounds(points: impl Iterator<Item = (f64, f64)>, y_from_zero: bool) -> (std::ops::Range<f64>, std::ops::Range<f64>) {
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in points {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    if x0 > x1 {
        return (0.0..1.0, 0.0..1.0);
    }
    if y_from_zero {
        y0 = y0.min(0.0);
    }
    let pad = |lo: f64, hi: f64| {
        let room = if hi > lo { (hi - lo) * 0.05 } else { 0.5 };
        (lo - room)..(hi + room)
    };
    let y = pad(y0, y1);
    (pad(x0, x1), if y_from_zero && y0 >= 0.0 { 0.0..y.end } else { y })
}

/// A tick label without needless digits: 1200, 12.5, 0.25.
fn short(v: f64) -> String {
    let a = v.abs();
    let s = if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[allow(clippy::too_many_arguments)]
fn draw(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(&str, Vec<(f64, f64)>)],
    x_range: std::ops::Range<f64>,
    y_range: std::ops::Range<f64>,
    x_tick: &dyn Fn(&f64) -> String,
    y_tick: &dyn Fn(&f64) -> String,
    mark_points: bool,
    legend: SeriesLabelPosition,
) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let root: DrawingArea<SVGBackend, Shift> = SVGBackend::new(path, SIZE).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| anyhow!("drawing {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(x_range, y_range)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(x_tick)
        .y_label_formatter(y_tick)
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (name, points)) in series.iter().enumerate() {
        let c = colour(i);
        chart
            .draw_series(LineSeries::new(points.iter().copied(), c.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3)));
        if mark_points {
            chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, c.filled()))).map_err(|e| err(&e))?;
        }
    }
    chart
        .configure_series_labels()
        .position(legend)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
