package report

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// palette tells ten lines apart (the Tableau 10 colours).
var palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255}, {148, 103, 189, 255},
	{140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255}, {188, 189, 34, 255}, {23, 190, 207, 255},
}

// WriteChart draws increments per second against clients, one panel per
// key distribution side by side, one line per approach, both axes
// logarithmic, as a PNG.
func WriteChart(w io.Writer, r *Report) error {
	rows := section(r.Rows, Matrix)
	dists := r.Dists
	if len(dists) == 0 {
		dists = []Dist{{Name: "none"}}
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range rows {
		if !x.Missing && x.Rate > 0 {
			lo, hi = math.Min(lo, x.Rate), math.Max(hi, x.Rate)
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))

	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = vg.Points(10)
	panels := make([]*plot.Plot, len(dists))
	inLegend := map[string]bool{}
	for i, d := range dists {
		p, err := panel(d, r, rows, lo, hi, inLegend, &legend)
		if err != nil {
			return err
		}
		panels[i] = p
	}
	const legendWidth = 1.6 * vg.Inch
	width := vg.Length(len(dists))*4.5*vg.Inch + legendWidth
	img := vgimg.NewWith(vgimg.UseWH(width, 5*vg.Inch), vgimg.UseDPI(110))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(dists), PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{panels}, tiles, draw.Crop(dc, 0, -legendWidth, 0, 0))
	for i, p := range panels {
		p.Draw(canvases[0][i])
	}
	legend.Draw(draw.Crop(dc, width-legendWidth, 0, 0, -vg.Inch/2))
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// panel draws one distribution's lines, adding each approach to the
// shared legend the first time one is drawn.
func panel(d Dist, r *Report, rows []Row, lo, hi float64, inLegend map[string]bool, legend *plot.Legend) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "keys: " + d.Name
	p.X.Label.Text = "clients"
	p.Y.Label.Text = "increments per second"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.Y.Tick.Marker = powersOfTen{}
	p.Y.Min, p.Y.Max = lo, hi
	var ticks plot.ConstantTicks
	for _, c := range r.Clients {
		if c > 0 {
			ticks = append(ticks, plot.Tick{Value: float64(c), Label: strconv.Itoa(c)})
		}
	}
	p.X.Tick.Marker = ticks
	if len(r.Clients) > 0 {
		p.X.Min, p.X.Max = float64(r.Clients[0]), float64(r.Clients[len(r.Clients)-1])
		if p.X.Min <= 0 {
			p.X.Min = 1
		}
		if p.X.Max <= p.X.Min {
			p.X.Max = p.X.Min * 2
		}
	}
	p.Add(plotter.NewGrid())
	for i, a := range r.Approaches {
		var pts plotter.XYs
		for _, c := range r.Clients {
			x := find(rows, a.Name, d.Name, c)
			if x != nil && !x.Missing && x.Rate > 0 && c > 0 {
				pts = append(pts, plotter.XY{X: float64(c), Y: x.Rate})
			}
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, fmt.Errorf("chart %s %s: %w", a.Name, d.Name, err)
		}
		col := palette[i%len(palette)]
		line.Color, line.Width = col, vg.Points(1.5)
		line.Dashes = plotutil.Dashes(i / len(palette))
		points.Color, points.Shape = col, plotutil.Shape(i)
		p.Add(line, points)
		if !inLegend[a.Name] {
			inLegend[a.Name] = true
			legend.Add(a.Name, line, points)
		}
	}
	return p, nil
}

// powersOfTen labels 1, 10, 100, 1k ... on a log axis.
type powersOfTen struct{}

func (powersOfTen) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for v := math.Pow(10, math.Floor(math.Log10(lo))); v <= hi*1.0001; v *= 10 {
		ticks = append(ticks, plot.Tick{Value: v, Label: short(v)})
		for m := 2.0; m < 10; m++ {
			if v*m <= hi {
				ticks = append(ticks, plot.Tick{Value: v * m})
			}
		}
	}
	return ticks
}

func short(v float64) string {
	switch {
	case v >= 1e9:
		return strconv.FormatFloat(v/1e9, 'g', -1, 64) + "G"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
