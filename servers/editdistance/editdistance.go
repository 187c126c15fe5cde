// Package editdistance measures how far apart two names are, for the places
// that answer a mistyped name with the one meant: a company file's unknown
// key, a colleague's handle asked for by a seat.
package editdistance

// Between is the optimal-string-alignment distance between a and b, over
// runes: an insertion, a deletion, a substitution, or a swap of two
// neighbours (mpc_servers for mcp_servers), the commonest typo in a name,
// each costs one.
func Between(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
