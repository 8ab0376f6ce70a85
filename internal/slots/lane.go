package slots

import "strconv"

// laneID names lane l of instance in counterd_instances.
func laneID(instance string, l int) string {
	return instance + "/" + strconv.Itoa(l)
}
