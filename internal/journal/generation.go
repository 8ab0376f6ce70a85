package journal

import (
	"crypto/rand"
	"encoding/hex"
)

// newGeneration returns a fresh random generation. Each Open makes one and
// writes it into every segment it creates, so rounds written after a
// journal directory was restored from a snapshot are told apart from the
// rounds written the first time round under the same sequence numbers.
func newGeneration() [generationSize]byte {
	var g [generationSize]byte
	rand.Read(g[:]) // never fails: see crypto/rand.Read
	return g
}

// generationString is how a generation is shown: 32 lowercase hex
// characters, like an instance id.
func generationString(g [generationSize]byte) string { return hex.EncodeToString(g[:]) }
