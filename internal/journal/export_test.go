package journal

// AppendV1Record lets the external tests build version 1 segments.
var AppendV1Record = appendV1Record
