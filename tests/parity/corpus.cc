#include "corpus.h"

#include <random>
#include <string_view>

namespace tide::tokenizer::parity {
namespace {

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string Cp(std::initializer_list<char32_t> cps) {
  std::string s;
  for (char32_t c : cps) AppendUtf8(c, &s);
  return s;
}

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}

  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  template <typename T>
  const T& Pick(const std::vector<T>& v) { return v[Int(0, static_cast<int>(v.size()) - 1)]; }
  char32_t Range(char32_t lo, char32_t hi) {
    return static_cast<char32_t>(std::uniform_int_distribution<uint32_t>(lo, hi)(rng_));
  }

  // Random letters from [lo, hi] forming a word of n code points.
  std::string Word(char32_t lo, char32_t hi, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) AppendUtf8(Range(lo, hi), &s);
    return s;
  }

  std::string Ascii() {
    static const std::vector<std::string> words = {
        "the", "giant", "panda", "is", "a", "bear", "species", "endemic", "to", "china",
        "What", "Protein", "binding", "affects", "CELL", "growth", "in", "mice", "?", "study",
        "results", "don't", "it's", "state-of-the-art", "e.g.", "(see", "Table", "2)", "x",
        "reranker", "cross-encoder", "tokenization", "unaffable", "running", "jumped", "I",
        "U.S.A.", "Dr.", "O'Neil", "#hashtag", "@user", "50%", "$100", "a+b=c", "foo_bar",
        "[brackets]", "{braces}", "<angle>", "quote\"d", "back\\slash", "semi;colon", "~tilde",
        "^caret", "`tick`", "|pipe|", "and/or", "...", "!!!", "?!", "--", "*", "&amp;"};
    std::string s;
    int n = Int(1, 14);
    for (int i = 0; i < n; ++i) {
      if (i) s += Int(0, 5) == 0 ? "  " : " ";
      s += Pick(words);
    }
    return s;
  }

  std::string Accents() {
    static const std::vector<std::string> words = {
        "café", "naïve", "résumé", "Ångström", "façade", "jalapeño", "Zürich", "São Paulo",
        "Œuvre", "straße", "ĲSSEL", "İstanbul", "ΣΊΣΥΦΟΣ", "Ὀδυσσεύς", "Ελληνικά", "Москва",
        "ёжик", "Łódź", "Dvořák", "ﬁnance", "Ǆemal", "ǅ", "ǈ", "Ω", "K", "Å"};
    std::string s;
    int n = Int(1, 6);
    for (int i = 0; i < n; ++i) {
      if (i) s += " ";
      int kind = Int(0, 3);
      if (kind == 0) {
        s += Pick(words);
      } else {
        // Base letter followed by 1-3 combining marks (decomposed form).
        static const std::vector<char32_t> marks = {0x300, 0x301, 0x302, 0x303, 0x308, 0x30A,
                                                    0x327, 0x328, 0x331, 0x35C, 0x20D7, 0x1DC0};
        int len = Int(2, 7);
        for (int k = 0; k < len; ++k) {
          AppendUtf8(Range('a', 'z'), &s);
          int m = Int(0, 3);
          for (int j = 0; j < m; ++j) AppendUtf8(Pick(marks), &s);
        }
      }
    }
    return s;
  }

  std::string Cjk() {
    std::string s;
    int n = Int(1, 5);
    for (int i = 0; i < n; ++i) {
      switch (Int(0, 5)) {
        case 0: s += Word(0x4E00, 0x9FFF, Int(1, 8)); break;          // CJK unified
        case 1: s += Word(0x3041, 0x3096, Int(1, 6)); break;          // hiragana
        case 2: s += Word(0x30A1, 0x30FA, Int(1, 6)); break;          // katakana
        case 3: s += Word(0xAC00, 0xD7A3, Int(1, 5)); break;          // hangul syllables
        case 4: s += Word(0x3400, 0x4DBF, Int(1, 3)); break;          // extension A
        default: s += Word(0x20000, 0x2A6DF, Int(1, 2)); break;       // extension B
      }
      s += Pick(std::vector<std::string>{"", " ", "。", "、", "，", "！", "？", "「", "」"});
    }
    return s;
  }

  std::string Thai() {
    std::string s;
    int n = Int(1, 4);
    for (int i = 0; i < n; ++i) {
      if (i) s += " ";
      s += Word(0x0E01, 0x0E2E, Int(1, 4));
      s += Cp({0x0E31});  // mai han-akat (Mn)
      s += Word(0x0E40, 0x0E44, 1);
      s += Word(0x0E01, 0x0E2E, Int(1, 3));
      s += Cp({0x0E48});  // tone mark
      if (Int(0, 2) == 0) s += Word(0x0E50, 0x0E59, Int(1, 3));  // Thai digits
    }
    return s;
  }

  std::string Arabic() {
    std::string s;
    int n = Int(1, 5);
    for (int i = 0; i < n; ++i) {
      if (i) s += " ";
      int len = Int(2, 7);
      for (int k = 0; k < len; ++k) {
        AppendUtf8(Range(0x0628, 0x064A), &s);
        if (Int(0, 3) == 0) AppendUtf8(Range(0x064B, 0x0652), &s);  // harakat (Mn)
      }
      if (Int(0, 4) == 0) s += Word(0x0660, 0x0669, Int(1, 4));  // Arabic-Indic digits
      if (Int(0, 6) == 0) s += Cp({0x061F});                      // Arabic question mark
      if (Int(0, 6) == 0) s += Word(0x05D0, 0x05EA, Int(2, 5));   // Hebrew
    }
    return s;
  }

  std::string Emoji() {
    static const std::vector<std::string> emoji = {
        Cp({0x1F600}), Cp({0x1F44D, 0x1F3FD}), Cp({0x1F468, 0x200D, 0x1F469, 0x200D, 0x1F467}),
        Cp({0x1F1EB, 0x1F1F7}), Cp({0x2764, 0xFE0F}), Cp({0x0031, 0xFE0F, 0x20E3}),
        Cp({0x1F3F3, 0xFE0F, 0x200D, 0x1F308}), Cp({0x1F9D1, 0x200D, 0x1F4BB}), Cp({0x2603}),
        Cp({0x1F4A9}), Cp({0x1F680}), Cp({0x1F937, 0x1F3FB, 0x200D, 0x2640, 0xFE0F}),
        Cp({0x1F3F4, 0xE0067, 0xE0062, 0xE0065, 0xE006E, 0xE0067, 0xE007F}), Cp({0x2728}),
        Cp({0x1F970}), Cp({0x1FAE0})};
    std::string s;
    int n = Int(1, 6);
    for (int i = 0; i < n; ++i) {
      if (Int(0, 1)) s += " ";
      if (Int(0, 2) == 0) s += Pick(std::vector<std::string>{"love", "great", "ok", "wow"});
      s += Pick(emoji);
    }
    return s;
  }

  std::string Controls() {
    static const std::vector<std::string> odd = {
        Cp({0x0}),   Cp({0x1}),    Cp({0x7}),    Cp({0x1B}),   Cp({0x7F}),   Cp({0x85}),
        Cp({0x9F}),  Cp({0x200B}), Cp({0x200C}), Cp({0x200D}), Cp({0x200E}), Cp({0x2060}),
        Cp({0xFEFF}), Cp({0xAD}),  Cp({0xFFFD}), Cp({0xE000}), Cp({0xF8FF}), Cp({0x0378}),
        Cp({0xE0001}), Cp({0xFE0F}), Cp({0x061C}), Cp({0x2028}), Cp({0x2029}), "\t", "\n",
        "\r", "\r\n", "\v", "\f"};
    std::string s;
    int n = Int(1, 8);
    for (int i = 0; i < n; ++i) {
      if (Int(0, 1)) s += Pick(std::vector<std::string>{"word", "ab", "x", "Test", "42"});
      s += Pick(odd);
    }
    return s;
  }

  std::string Spaces() {
    static const std::vector<std::string> spaces = {
        " ",          Cp({0xA0}),   Cp({0x1680}), Cp({0x2000}), Cp({0x2002}), Cp({0x2003}),
        Cp({0x2007}), Cp({0x2009}), Cp({0x200A}), Cp({0x202F}), Cp({0x205F}), Cp({0x3000}),
        "\t",         "  "};
    std::string s;
    int n = Int(1, 8);
    for (int i = 0; i < n; ++i) {
      s += Pick(spaces);
      s += Pick(std::vector<std::string>{"alpha", "beta", "10", "gamma", "δ", "x-y"});
    }
    if (Int(0, 1)) s += Pick(spaces);
    return s;
  }

  std::string LongWord() {
    std::string s;
    switch (Int(0, 4)) {
      case 0: s = Word('a', 'z', Int(95, 130)); break;
      case 1: s = Word(0x00E0, 0x00FF, Int(98, 104)); break;
      case 2: {  // a long chemical-name-like word made of vocab pieces
        static const std::vector<std::string> parts = {"methyl", "ethyl", "amino", "phenyl",
                                                       "oxy", "hydro", "chloro", "benz"};
        while (s.size() < 110) s += Pick(parts);
        break;
      }
      case 3: s = Word('0', '9', Int(99, 120)); break;
      default: s = Word(0x4E00, 0x4E20, 3) + Word('A', 'Z', Int(100, 101)); break;
    }
    if (Int(0, 1)) s = "prefix " + s + " suffix";
    return s;
  }

  std::string Url() {
    static const std::vector<std::string> hosts = {"example.com", "www.ncbi.nlm.nih.gov",
                                                   "en.wikipedia.org", "münchen.de", "localhost:8080"};
    static const std::vector<std::string> paths = {"/wiki/Giant_panda", "/pubmed/?term=p53+mice",
                                                   "/a/b/c.html#frag", "/search?q=a%20b&lang=en",
                                                   "/~user/index.php", ""};
    std::string s = Pick(std::vector<std::string>{"http://", "https://", "ftp://", "", "www."});
    s += Pick(hosts) + Pick(paths);
    if (Int(0, 1)) s = "see " + s + " for details";
    if (Int(0, 3) == 0) s += " mail: jane.doe+tag@example.org";
    return s;
  }

  std::string Numbers() {
    static const std::vector<std::string> nums = {
        "0", "42", "-17", "3.14159", "1,234,567.89", "1e-10", "6.02e23", "0x1F", "1/2", "½",
        "²", "³⁄₄", "Ⅻ", "٣٤٥", "१२३", "１２３", "10%", "$5", "€3,50", "£1", "¥100", "₹99",
        "2024-01-15", "12:30:45", "+1 (555) 123-4567", "v1.2.3", "#1", "No.7", "1st", "22nd"};
    std::string s;
    int n = Int(1, 8);
    for (int i = 0; i < n; ++i) {
      if (i) s += Int(0, 3) ? " " : "";
      s += Pick(nums);
    }
    return s;
  }

  std::string Mixed() {
    std::string s;
    int n = Int(2, 6);
    for (int i = 0; i < n; ++i) {
      if (i && Int(0, 2)) s += " ";
      switch (Int(0, 9)) {
        case 0: s += Ascii(); break;
        case 1: s += Accents(); break;
        case 2: s += Cjk(); break;
        case 3: s += Thai(); break;
        case 4: s += Arabic(); break;
        case 5: s += Emoji(); break;
        case 6: s += Numbers(); break;
        case 7: s += Word(0x0905, 0x0939, Int(1, 3)) + Cp({0x093E, 0x094D}); break;  // Devanagari
        case 8: s += Word(0x0410, 0x044F, Int(2, 8)); break;                         // Cyrillic
        default: s += Word(0xFF21, 0xFF3A, Int(1, 4)) + Cp({0x3002}); break;          // fullwidth
      }
    }
    return s;
  }

  std::string Specials() {
    static const std::vector<std::string> specials = {
        "[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]", "<s>", "</s>", "<pad>", "<unk>",
        "<mask>", "<extra_id_0>", "<extra_id_99>", "[sep]", "[ MASK ]", "<<s>>", "[SEP][SEP]"};
    std::string s;
    int n = Int(1, 5);
    for (int i = 0; i < n; ++i) {
      s += Pick(std::vector<std::string>{"", " ", "  ", "word", "The ", "x"});
      s += Pick(specials);
    }
    if (Int(0, 1)) s += " end";
    return s;
  }

  std::string Whitespace() {
    return Pick(std::vector<std::string>{" ", "  ", "\t", "\n", "\r\n", Cp({0xA0}),
                                         Cp({0x3000}), " \t \n ", Cp({0x2003, 0x2009}),
                                         Cp({0x200B}), Cp({0xFEFF, 0x20})});
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace

std::vector<CorpusText> GenerateTexts(uint64_t seed, int per_category) {
  Gen g(seed);
  std::vector<CorpusText> out;
  out.push_back({"empty", ""});
  for (int i = 0; i < per_category; ++i) {
    out.push_back({"ascii", g.Ascii()});
    out.push_back({"accents", g.Accents()});
    out.push_back({"cjk", g.Cjk()});
    out.push_back({"thai", g.Thai()});
    out.push_back({"arabic", g.Arabic()});
    out.push_back({"emoji", g.Emoji()});
    out.push_back({"control", g.Controls()});
    out.push_back({"spaces", g.Spaces()});
    out.push_back({"long_word", g.LongWord()});
    out.push_back({"url", g.Url()});
    out.push_back({"numbers", g.Numbers()});
    out.push_back({"mixed", g.Mixed()});
    out.push_back({"specials", g.Specials()});
    if (i % 4 == 0) out.push_back({"whitespace_only", g.Whitespace()});
  }
  return out;
}

std::string GenerateDocument(uint64_t seed, int words) {
  Gen g(seed);
  std::string s;
  int count = 0;
  while (count < words) {
    std::string piece;
    int r = g.Int(0, 19);
    if (r < 10) {
      piece = g.Ascii();
    } else if (r < 12) {
      piece = g.Accents();
    } else if (r == 12) {
      piece = g.Cjk();
    } else if (r == 13) {
      piece = g.Numbers();
    } else if (r == 14) {
      piece = g.Url();
    } else if (r == 15) {
      piece = g.Emoji();
    } else if (r == 16) {
      piece = g.Arabic();
    } else if (r == 17) {
      piece = g.Mixed();
    } else if (r == 18) {
      piece = g.Thai();
    } else {
      piece = g.Spaces();
    }
    for (char c : piece) count += c == ' ';
    ++count;
    if (!s.empty()) s += g.Int(0, 9) == 0 ? ". " : " ";
    s += piece;
  }
  return s;
}

std::string GenerateQuery(uint64_t seed, int words) {
  Gen g(seed);
  std::string s;
  while (static_cast<int>(s.size()) < words * 5) {
    if (!s.empty()) s += " ";
    s += g.Int(0, 5) == 0 ? g.Accents() : g.Ascii();
  }
  return s;
}

}  // namespace tide::tokenizer::parity
