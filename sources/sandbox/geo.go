package sandbox

import (
	"math"

	"github.com/prodapi/prodapi/sources"
)

// Geo operators are evaluated on the plane of [lng, lat] (see the package
// comment for what is approximate). Distances of GeoJSON queries are
// great-circle metres on MongoDB's sphere.
const earthRadiusMetres = 6378100

type point struct{ x, y float64 }

// A shape is a query region.
type shape interface {
	contains(p point) bool
}

type box struct{ min, max point }

func (b box) contains(p point) bool {
	return p.x >= b.min.x && p.x <= b.max.x && p.y >= b.min.y && p.y <= b.max.y
}

type circle struct {
	c         point
	r         float64
	spherical bool // r in radians
}

func (c circle) contains(p point) bool {
	if c.spherical {
		return sphereAngle(c.c, p) <= c.r
	}
	return math.Hypot(p.x-c.c.x, p.y-c.c.y) <= c.r
}

// polygon is an outer ring and holes; multi holds more polygons (any).
type polygon struct {
	rings [][]point
	multi []polygon
}

func (pg polygon) contains(p point) bool {
	for _, m := range pg.multi {
		if m.contains(p) {
			return true
		}
	}
	if len(pg.rings) == 0 {
		return false
	}
	if !inRing(pg.rings[0], p, true) {
		return false
	}
	for _, hole := range pg.rings[1:] {
		if inRing(hole, p, false) {
			return false
		}
	}
	return true
}

// samePoint is a GeoJSON Point query region for $geoIntersects.
type samePoint point

func (s samePoint) contains(p point) bool { return p == point(s) }

// inRing is ray casting; boundary points count as inside when boundary is
// set.
func inRing(ring []point, p point, boundary bool) bool {
	n := len(ring)
	if n < 3 {
		return false
	}
	in := false
	for i, j := 0, n-1; i < n; j, i = i, i+1 {
		a, b := ring[i], ring[j]
		if onSegment(a, b, p) {
			return boundary
		}
		if (a.y > p.y) != (b.y > p.y) && p.x < (b.x-a.x)*(p.y-a.y)/(b.y-a.y)+a.x {
			in = !in
		}
	}
	return in
}

func onSegment(a, b, p point) bool {
	cross := (b.x-a.x)*(p.y-a.y) - (b.y-a.y)*(p.x-a.x)
	if math.Abs(cross) > 1e-12 {
		return false
	}
	return p.x >= math.Min(a.x, b.x) && p.x <= math.Max(a.x, b.x) && p.y >= math.Min(a.y, b.y) && p.y <= math.Max(a.y, b.y)
}

// sphereAngle is the central angle between two [lng, lat] points in
// radians (haversine).
func sphereAngle(a, b point) float64 {
	rad := math.Pi / 180
	lat1, lat2 := a.y*rad, b.y*rad
	dlat, dlng := (b.y-a.y)*rad, (b.x-a.x)*rad
	h := math.Sin(dlat/2)*math.Sin(dlat/2) + math.Cos(lat1)*math.Cos(lat2)*math.Sin(dlng/2)*math.Sin(dlng/2)
	return 2 * math.Asin(math.Sqrt(math.Min(1, h)))
}

func number(v any) (float64, bool) {
	switch v := normalize(v).(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, !math.IsNaN(v) && !math.IsInf(v, 0)
	}
	return 0, false
}

// legacyPoint reads [x, y] or a document whose first two fields are
// numbers ({lng: x, lat: y}).
func legacyPoint(v any) (point, bool) {
	switch v := normalize(v).(type) {
	case []any:
		if len(v) >= 2 {
			x, ok1 := number(v[0])
			y, ok2 := number(v[1])
			return point{x, y}, ok1 && ok2
		}
	case *sources.Doc:
		f := v.Fields()
		if len(f) >= 2 {
			x, ok1 := number(f[0].Value)
			y, ok2 := number(f[1].Value)
			return point{x, y}, ok1 && ok2
		}
	}
	return point{}, false
}

func pointList(v any) ([]point, bool) {
	list, ok := normalize(v).([]any)
	if !ok {
		return nil, false
	}
	pts := make([]point, 0, len(list))
	for _, e := range list {
		p, ok := legacyPoint(e)
		if !ok {
			return nil, false
		}
		pts = append(pts, p)
	}
	return pts, true
}

// docPoints reads the locations of a stored value: a legacy pair, a
// GeoJSON Point, or the vertices of another GeoJSON geometry.
func docPoints(v any) []point {
	if d, ok := v.(*sources.Doc); ok {
		if _, isGeo := d.String("type"); isGeo {
			c, _ := d.Get("coordinates")
			var pts []point
			collectCoords(c, &pts, 0)
			return pts
		}
	}
	if p, ok := legacyPoint(v); ok {
		return []point{p}
	}
	return nil
}

func collectCoords(v any, pts *[]point, depth int) {
	if depth > 4 {
		return
	}
	if p, ok := legacyPoint(v); ok {
		if a, isArr := normalize(v).([]any); isArr {
			if _, nested := normalize(a[0]).([]any); !nested {
				*pts = append(*pts, p)
				return
			}
		}
	}
	if a, ok := normalize(v).([]any); ok {
		for _, e := range a {
			collectCoords(e, pts, depth+1)
		}
	}
}

// geoJSONShape reads a {$geometry: {type, coordinates}} region.
func geoJSONShape(g any) (shape, error) {
	d, ok := normalize(g).(*sources.Doc)
	if !ok {
		return nil, invalid("$geometry needs a GeoJSON object")
	}
	typ, _ := d.String("type")
	coords, _ := d.Get("coordinates")
	switch typ {
	case "Point":
		p, ok := legacyPoint(coords)
		if !ok {
			return nil, invalid("bad GeoJSON Point")
		}
		return samePoint(p), nil
	case "Polygon":
		return readPolygon(coords)
	case "MultiPolygon":
		list, ok := normalize(coords).([]any)
		if !ok {
			return nil, invalid("bad GeoJSON MultiPolygon")
		}
		var mp polygon
		for _, e := range list {
			pg, err := readPolygon(e)
			if err != nil {
				return nil, err
			}
			mp.multi = append(mp.multi, pg)
		}
		return mp, nil
	}
	return nil, invalid("unsupported GeoJSON type %q", typ)
}

func readPolygon(coords any) (polygon, error) {
	rings, ok := normalize(coords).([]any)
	if !ok || len(rings) == 0 {
		return polygon{}, invalid("bad GeoJSON Polygon")
	}
	var pg polygon
	for _, r := range rings {
		pts, ok := pointList(r)
		if !ok || len(pts) < 3 {
			return polygon{}, invalid("bad GeoJSON Polygon ring")
		}
		pg.rings = append(pg.rings, pts)
	}
	return pg, nil
}

func geoPred(op string, arg any, ops *sources.Doc) (pred, error) {
	switch op {
	case "$geoWithin", "$geoIntersects":
		d, ok := normalize(arg).(*sources.Doc)
		if !ok || d.Len() != 1 {
			return nil, invalid("%s needs one shape", op)
		}
		f := d.Fields()[0]
		var s shape
		switch {
		case f.Key == "$geometry":
			var err error
			if s, err = geoJSONShape(f.Value); err != nil {
				return nil, err
			}
		case op == "$geoIntersects":
			return nil, invalid("$geoIntersects needs $geometry")
		case f.Key == "$box":
			pts, ok := pointList(f.Value)
			if !ok || len(pts) != 2 {
				return nil, invalid("$box needs two corners")
			}
			s = box{point{math.Min(pts[0].x, pts[1].x), math.Min(pts[0].y, pts[1].y)},
				point{math.Max(pts[0].x, pts[1].x), math.Max(pts[0].y, pts[1].y)}}
		case f.Key == "$center" || f.Key == "$centerSphere":
			list, ok := normalize(f.Value).([]any)
			if !ok || len(list) != 2 {
				return nil, invalid("%s needs [center, radius]", f.Key)
			}
			c, ok1 := legacyPoint(list[0])
			r, ok2 := number(list[1])
			if !ok1 || !ok2 || r < 0 {
				return nil, invalid("%s needs [center, radius]", f.Key)
			}
			s = circle{c: c, r: r, spherical: f.Key == "$centerSphere"}
		case f.Key == "$polygon":
			pts, ok := pointList(f.Value)
			if !ok || len(pts) < 3 {
				return nil, invalid("$polygon needs three points")
			}
			s = polygon{rings: [][]point{pts}}
		default:
			return nil, invalid("unsupported %s shape %s", op, f.Key)
		}
		within := op == "$geoWithin"
		return func(fv *fieldValues) bool {
			return anyLocation(fv, func(pts []point) bool {
				if len(pts) == 0 {
					return false
				}
				for _, p := range pts {
					if s.contains(p) != within {
						return !within // intersects: one vertex inside
					}
				}
				return within
			})
		}, nil
	}
	return nearPred(op, arg, ops)
}

// anyLocation applies test to each location a field holds: a point, a
// geometry, or an array of them.
func anyLocation(fv *fieldValues, test func([]point) bool) bool {
	for _, v := range fv.vals {
		if pts := docPoints(v); pts != nil {
			if test(pts) {
				return true
			}
			continue
		}
		if a, ok := v.([]any); ok {
			for _, e := range a {
				if pts := docPoints(e); pts != nil && test(pts) {
					return true
				}
			}
		}
	}
	return false
}

// nearPred filters by $minDistance/$maxDistance only; MongoDB would also
// order by distance.
func nearPred(op string, arg any, ops *sources.Doc) (pred, error) {
	var center point
	geoJSON := false
	maxD, minD := math.Inf(1), 0.0
	readDist := func(d *sources.Doc) error {
		for _, k := range []string{"$maxDistance", "$minDistance"} {
			v, ok := d.Get(k)
			if !ok {
				continue
			}
			n, ok := number(v)
			if !ok || n < 0 {
				return invalid("%s needs a non-negative number", k)
			}
			if k == "$maxDistance" {
				maxD = n
			} else {
				minD = n
			}
		}
		return nil
	}
	if d, ok := normalize(arg).(*sources.Doc); ok && d.Has("$geometry") {
		g, _ := d.Get("$geometry")
		gd, ok := normalize(g).(*sources.Doc)
		if typ, _ := gd.String("type"); !ok || typ != "Point" {
			return nil, invalid("%s needs a GeoJSON Point", op)
		}
		c, _ := gd.Get("coordinates")
		p, ok := legacyPoint(c)
		if !ok {
			return nil, invalid("%s needs a GeoJSON Point", op)
		}
		center, geoJSON = p, true
		if err := readDist(d); err != nil {
			return nil, err
		}
	} else {
		p, ok := legacyPoint(arg)
		if !ok {
			return nil, invalid("%s needs a point", op)
		}
		center = p
	}
	if err := readDist(ops); err != nil {
		return nil, err
	}
	dist := func(p point) float64 {
		switch {
		case geoJSON:
			return sphereAngle(center, p) * earthRadiusMetres
		case op == "$nearSphere":
			return sphereAngle(center, p)
		}
		return math.Hypot(p.x-center.x, p.y-center.y)
	}
	return func(fv *fieldValues) bool {
		return anyLocation(fv, func(pts []point) bool {
			for _, p := range pts {
				if d := dist(p); d >= minD && d <= maxD {
					return true
				}
			}
			return false
		})
	}, nil
}
