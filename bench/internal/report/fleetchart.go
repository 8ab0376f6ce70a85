package report

import (
	"fmt"
	"io"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// WriteFleetChart draws the whole PostgreSQL server's CPU per increment
// against the number of counterd daemons sharing the load, one solid line
// per workload and pipeline depth, and the peer under the same load as a
// dashed flat line of the same colour (one buffer, whatever N), as a PNG.
// The x axis is logarithmic, the y axis linear from zero.
func WriteFleetChart(w io.Writer, r *Report) error {
	rows := section(r.Rows, Fleet)
	p := plot.New()
	p.Title.Text = "PostgreSQL CPU per increment, N sidecars on one PostgreSQL"
	p.X.Label.Text = "counterd daemons (N)"
	p.Y.Label.Text = "PostgreSQL CPU µs per increment"
	p.X.Scale = plot.LogScale{}
	p.Y.Min, p.Y.Max = 0, 1
	var sizes []int
	for _, x := range rows {
		if x.Approach != Peer && x.Daemons > 0 && !slices.Contains(sizes, x.Daemons) {
			sizes = append(sizes, x.Daemons)
		}
	}
	slices.Sort(sizes)
	if len(sizes) == 0 {
		sizes = []int{1}
	}
	lo, hi := float64(sizes[0]), float64(sizes[len(sizes)-1])
	if hi <= lo {
		hi = lo * 2
	}
	p.X.Min, p.X.Max = lo, hi
	var ticks plot.ConstantTicks
	for _, n := range sizes {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: strconv.Itoa(n)})
	}
	p.X.Tick.Marker = ticks
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(9)

	type series struct {
		keys     string
		pipeline int
	}
	var all []series
	for _, x := range rows {
		if s := (series{x.Keys, x.Pipeline}); !slices.Contains(all, s) {
			all = append(all, s)
		}
	}
	for i, s := range all {
		col := palette[i%len(palette)]
		var pts plotter.XYs
		peerUS := -1.0
		for _, x := range rows {
			if x.Keys != s.keys || x.Pipeline != s.pipeline || x.Missing {
				continue
			}
			us := x.MicrosPerIncr(x.CPU.PGServer)
			if us < 0 {
				continue
			}
			p.Y.Max = max(p.Y.Max, us*1.1)
			if x.Approach == Peer {
				peerUS = us
			} else if x.Daemons > 0 {
				pts = append(pts, plotter.XY{X: float64(x.Daemons), Y: us})
			}
		}
		name := fmt.Sprintf("%s keys, -P %d", s.keys, s.pipeline)
		if len(pts) > 0 {
			slices.SortFunc(pts, func(a, b plotter.XY) int { return int(a.X - b.X) })
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return fmt.Errorf("fleet chart %s: %w", name, err)
			}
			line.Color, line.Width = col, vg.Points(1.5)
			points.Color, points.Shape = col, plotutil.Shape(i)
			p.Add(line, points)
			p.Legend.Add("counterd, "+name, line, points)
		}
		if peerUS >= 0 {
			line, err := plotter.NewLine(plotter.XYs{{X: lo, Y: peerUS}, {X: hi, Y: peerUS}})
			if err != nil {
				return fmt.Errorf("fleet chart peer %s: %w", name, err)
			}
			line.Color, line.Width, line.Dashes = col, vg.Points(1.5), []vg.Length{vg.Points(6), vg.Points(3)}
			p.Add(line)
			p.Legend.Add("peer, "+name, line)
		}
	}
	img := vgimg.NewWith(vgimg.UseWH(7*vg.Inch, 4.5*vg.Inch), vgimg.UseDPI(110))
	p.Draw(draw.New(img))
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}
