package protocol

import "testing"

func TestParticipationAllows(t *testing.T) {
	tests := []struct {
		name     string
		p        Participation
		answered []int
		r        int
		want     bool
	}{
		{"roster, first round", Participation{}, nil, 1, true},
		{"roster, next round", Participation{}, []int{1, 2}, 3, true},
		{"roster, a round again", Participation{}, []int{1, 2}, 2, false},
		{"roster, an earlier round", Participation{}, []int{1, 4}, 3, false},
		{"limit reached", Participation{MaxRounds: 2}, []int{1, 3}, 5, false},
		{"under the limit", Participation{MaxRounds: 2}, []int{1}, 5, true},
		{"gap too short", Participation{MinGap: 3}, []int{1}, 3, false},
		{"gap exactly", Participation{MinGap: 3}, []int{1}, 4, true},
		{"gap of one is none", Participation{MinGap: 1}, []int{1}, 2, true},
	}
	for _, tt := range tests {
		if got := tt.p.Allows(tt.answered, tt.r); got != tt.want {
			t.Errorf("%s: Allows(%v, %d) = %v, want %v", tt.name, tt.answered, tt.r, got, tt.want)
		}
	}
}

func TestParticipationDone(t *testing.T) {
	dpals := Participation{Cohort: 20, MaxRounds: 2, MinGap: 1}
	dpease := Participation{Cohort: 20, MaxRounds: 2, MinGap: 3} // counts 1–3, Gram 4–6
	tests := []struct {
		name      string
		p         Participation
		answered  []int
		now, last int
		want      bool
	}{
		{"spent, its round over", dpals, []int{1, 2}, 3, 7, true},
		{"spent, its round still open", dpals, []int{1, 2}, 2, 7, false},
		{"a round left", dpals, []int{2}, 3, 7, false},
		{"never answered", dpals, nil, 5, 7, false},
		{"a Gram round ahead", dpease, []int{3}, 4, 6, false},
		{"both answered", dpease, []int{3, 6}, 6, 6, false},
		{"gap past the last round", dpease, []int{5}, 6, 6, true},
		{"a roster run", Participation{MaxRounds: 2}, []int{1, 2}, 3, 7, false},
	}
	for _, tt := range tests {
		if got := tt.p.Done(tt.answered, tt.now, tt.last); got != tt.want {
			t.Errorf("%s: Done(%v, %d, %d) = %v, want %v", tt.name, tt.answered, tt.now, tt.last, got, tt.want)
		}
	}
}

func TestParticipationValidate(t *testing.T) {
	for _, p := range []Participation{{Cohort: -1}, {MaxRounds: -2}, {MinGap: -1}} {
		if p.Validate() == nil {
			t.Errorf("%+v: no error", p)
		}
	}
	if err := (Participation{Cohort: 1000, MaxRounds: 2, MinGap: 3}).Validate(); err != nil {
		t.Error(err)
	}
}
