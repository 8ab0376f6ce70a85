package report

import (
	"fmt"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// WriteSustainChart draws counterd's pending keys against seconds into
// the sustained load, one line per sustain row, both axes linear, as a
// PNG. A line that climbs is a database falling behind.
func WriteSustainChart(w io.Writer, r *Report) error {
	p := plot.New()
	p.Title.Text = "counterd pending keys under a sustained load"
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "pending keys"
	p.X.Min, p.Y.Min = 0, 0
	p.X.Max, p.Y.Max = 1, 1
	p.Y.Tick.Marker = thousandsTicks{}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	for i, x := range section(r.Rows, Sustain) {
		pts := make(plotter.XYs, len(x.Series))
		for j, s := range x.Series {
			pts[j] = plotter.XY{X: s.Seconds, Y: s.PendingKeys}
			p.X.Max, p.Y.Max = max(p.X.Max, s.Seconds), max(p.Y.Max, s.PendingKeys*1.1)
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("sustain chart %s %s: %w", x.Approach, x.Keys, err)
		}
		col := palette[i%len(palette)]
		line.Color, line.Width = col, vg.Points(1.5)
		points.Color, points.Shape = col, plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(fmt.Sprintf("%s, %s keys, %s/s offered", x.Approach, x.Keys, short(x.Offered)), line, points)
	}
	img := vgimg.NewWith(vgimg.UseWH(7*vg.Inch, 4*vg.Inch), vgimg.UseDPI(110))
	p.Draw(draw.New(img))
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// thousandsTicks labels a linear axis with round numbers written short
// (5k, 10k, 1.5M).
type thousandsTicks struct{}

func (thousandsTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = short(ticks[i].Value)
		}
	}
	return ticks
}
