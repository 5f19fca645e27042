package method

import "github.com/privrec/privrec/dpals"

// The neighbouring relations the claims' ε hold for (model.Privacy's
// Neighbouring). A deployment's server learns who takes part and how many
// (enrolment, the setup round's exact count, arrival words), so the
// user-level claims of the federated methods hold for zero-out neighbours:
// one user's history emptied, their participation public. A user with no
// ratings contributes nothing but their noise share, so the sensitivity,
// and with it ε, is the one the add/remove analysis computes for the
// user's ratings.
const (
	// NeighboursZeroOutUser is dp-als's, dp-biases' and dp-ease's.
	NeighboursZeroOutUser = dpals.Neighbouring
	// NeighboursUserValues is the HDPMF family's: the values of one
	// user's ratings change, which items everyone rated is public.
	NeighboursUserValues = "change the values of all of one user's ratings, within the scale; which items each user rated, " +
		"who takes part and how many are public (the setup round's counts are exact)"
	// NeighboursUserRatings is LDP-OP's: one user's ratings, values and
	// items, replaced by any others, the user taking part either way.
	NeighboursUserRatings = "replace all of one user's ratings (values and which items) by any others; the user takes part " +
		"either way, and the number of users is public"
	// NeighboursRatingValue is the relation of the methods that protect
	// one rating's value: which ratings exist is public.
	NeighboursRatingValue = "change the value of one rating, within the scale; which ratings exist (who rated what) is public"
	// NeighboursRatingExistence is the SDCF family's: whether one user
	// rated one item, the user taking part either way.
	NeighboursRatingExistence = "flip whether one user rated one item; the user takes part either way, and the number of " +
		"users is public"
	// NeighboursAddRemoveUser is dp-pop's: a trusted curator releases
	// only the noisy popularity vector, so one user (all of their
	// ratings) may be added or removed.
	NeighboursAddRemoveUser = "add/remove one user (all of one user's ratings); the curator releases only the noisy " +
		"popularity vector, not the number of users"
)
