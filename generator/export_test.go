package generator

// UnifiedDiff exposes unifiedDiff to the external tests, so golden
// mismatches are shown as check shows drift.
var UnifiedDiff = unifiedDiff
