// Package accountant counts what each protected unit has spent of its
// privacy budget.
//
// An Accountant keeps a ledger per unit (a user, or a rating where a
// method protects ratings) of every release made from that unit's data.
// Each release is charged before its noise is drawn, and a release that
// would take the unit past its budget is refused, recording nothing, so
// that the caller releases nothing. It composes each unit's releases by
// basic composition (Σε, Σδ) and by advanced composition, optionally lets
// either one admit a release (Config.Advanced), and reports ε per round and
// in total (Report).
//
// The budgets themselves come from a privacy specification (package
// budget) or are infinite for units that are only tracked; the noise that
// the charges pay for is drawn by the mechanisms of package dp. The
// accountant depends on neither.
package accountant
