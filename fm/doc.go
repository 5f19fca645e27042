// Package fm implements second-order factorization machines (Rendle,
// "Factorization machines with libFM", ACM TIST 2012) over a rating's
// user, its item and their side features, and SD-FM, the SDCF protocol
// over them (Jiang, Li and Lin 2019, §5).
//
// # The model
//
// A rating (u, i) is a sparse feature vector x: the user indicator, the
// item indicator and, with Config.Features, the item's public attributes
// (its genres with weights 1/|genres| summing to 1, as libFM users encode
// a set, and its release-year bucket) and the user's attributes (gender,
// age bracket, occupation), read from the dataset's side files
// (ratings.SideSource). The FM predicts
//
//	ŷ(x) = w_0 + Σ_f w_f x_f + Σ_{f<g} <v_f, v_g> x_f x_g
//
// in O(k·n) for n active features by Rendle's identity, and Train fits it
// by SGD on the squared loss with L2 penalties. With IDs only it is
// exactly biased MF (w_0 + b_u + b_i + <p_u, q_i>).
//
// # One model package
//
// Split x into the user's side (indicator and attributes) and the item's.
// The pairwise term is the interactions within each side plus
// <Σ_user x v, Σ_item x v>, so every FM over such features is a biased MF
// with U[u] = Σ_user x_f v_f, V[i] = Σ_item x_f v_f and the within-side
// terms folded into the biases (ToModel). An FM is saved, loaded,
// evaluated and recommends through model.Model with no new model kind; a
// user whose attributes are known but who has no training rating is
// predicted as unknown (the model has no row for attributes alone).
//
// # SD-FM
//
// TrainSD runs SDCF's protocol (package sdcf: SGLD, two-stage randomized
// response and truncated fake gradients, unchanged) over the FM. What
// stays on the device: the user's ratings, the user's bias and factor
// and the user's attributes. SDCF §5 keeps only the user-indicator
// parameters personal and treats every other column (age, gender, …) as
// public; but a gradient for the parameter of "gender = F" is sent only
// by women, so that would publish every user's attributes to the server.
// SD-FM therefore uses no user attributes (Features All is refused); their
// parameters could be trained only from gradients that reveal them.
// Public: the item indicators' and item attributes' biases and factors,
// on the server.
//
// The clients are sdcf's: each sees, for every item i, the collapsed item
// row [b_i, q_i] (b_i the item side's biases and own interactions, q_i =
// Σ_item x v) as SDMF's v_i with the item-offset coordinate, and uploads
// the SGLD gradient for that row for the items its randomized response
// picks, real for rated ones and fake for the others. The server (here)
// computes each row's move exactly as SDMF's server does (the mean data
// gradient G_i received for it, scaled by κ, the public prior taken out)
// and splits it between the FM's public parameters: each item attribute
// takes SDConfig.AttrStep times the least-squares fit Σ_i x_i G_i / Σ_i
// x_i² of the moves of the items that carry it, each item indicator the
// rest (its bias also absorbing the change of the row's own
// interactions). Every row that received uploads thus moves as under SDMF
// (as stable), while the prior Λ, applied to the FM's parameters, shrinks
// an item towards its attributes' part rather than towards 0, and a row
// with no uploads moves with its attributes. With IDs the run is SDMF's
// bit for bit. The uploads have exactly SDMF's form, so SDMF's privacy
// analysis and the audit's attacks apply unchanged.
//
// Privacy of SD-FM (as SDMF's): the unit is the existence of a rating;
// nobody is trusted (the server is honest-but-curious); per round ε_I + ε_g,
// over T rounds min(ε_P, T·ε_I) + T·ε_g. Rating values and the user's
// parameters are hidden only by Langevin noise and never leaving the
// device; no ε is claimed for them, and SDMF's grid finding (the audit's
// grid attack recovers which uploads are real from their values) applies
// unchanged. The public side features describe the catalog, not the
// users: they are known to everyone before training, and the attribute
// parameters the server learns (genre and decade effects) are
// post-processing of the same uploads SDMF's server receives, so they
// cost no further ε. User attributes are not features at all.
package fm
